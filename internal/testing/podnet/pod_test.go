package podnet_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// RequireRoot skips a test that makes network namespaces where this
// process cannot, saying so, and fails it under CI (CI=true).
func RequireRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, podnet.Root())
}

// addPod makes a pod's namespace, removed when the test ends.
func addPod(t *testing.T, ns, name, ip string) podnet.Pod {
	t.Helper()
	p, err := podnet.AddPod(ns, name, ip)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Remove(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// answer makes every connection to l answer who and close.
func answer(t *testing.T, l net.Listener, who string) {
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintln(c, who)
			_ = c.Close()
		}
	}()
}

func read(t *testing.T, c net.Conn, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// Two pods bind the same port on all addresses, each answers at its own
// address, from the host and from the other pod, and each reaches the host.
func TestPodsBindTheSamePort(t *testing.T) {
	RequireRoot(t)
	a := addPod(t, "podnet-test", "a", "10.0.250.1")
	b := addPod(t, "podnet-test", "b", "10.0.250.2")
	for _, p := range []podnet.Pod{a, b} {
		l, err := podnet.Listen(p.Netns, "0.0.0.0:8080")
		if err != nil {
			t.Fatal(err)
		}
		answer(t, l, p.IP)
	}
	for _, p := range []podnet.Pod{a, b} {
		c, err := net.Dial("tcp", p.IP+":8080")
		if got := read(t, c, err); got != p.IP {
			t.Errorf("from the host, %s:8080 answered %q", p.IP, got)
		}
	}
	// Made again, a pod's namespace is kept as it is: its listener answers.
	if again, err := podnet.AddPod("podnet-test", "a", "10.0.250.1"); err != nil || again != a {
		t.Fatalf("AddPod again: %+v, %v; want %+v", again, err, a)
	}
	c, err := podnet.Dial(b.Netns, a.IP+":8080")
	if got := read(t, c, err); got != a.IP {
		t.Errorf("from pod b, %s:8080 answered %q", a.IP, got)
	}
	c, err = podnet.Dial(a.Netns, b.IP+":8080")
	if got := read(t, c, err); got != b.IP {
		t.Errorf("from pod a, %s:8080 answered %q", b.IP, got)
	}
	host, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	answer(t, host, "host")
	_, port, _ := net.SplitHostPort(host.Addr().String())
	c, err = podnet.Dial(a.Netns, net.JoinHostPort(podnet.Gateway, port))
	if got := read(t, c, err); got != "host" {
		t.Errorf("from pod a, the host at %s answered %q", podnet.Gateway, got)
	}
}

// testNetwork is the pods' network these tests bring up themselves: no
// suite takes it.
const testNetwork podnet.Network = 62

// networkUp brings the pods' network n up with hack/podnet.sh, as the
// suites do, and down again when the test ends.
func networkUp(t *testing.T, n podnet.Network) {
	t.Helper()
	RequireRoot(t)
	script := filepath.Join("..", "..", "..", "hack", "podnet.sh")
	run := func(command string) error {
		c := exec.Command(script, command)
		c.Env = append(os.Environ(), fmt.Sprintf("PODNET=%d", n))
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("PODNET=%d hack/podnet.sh %s: %w: %s", n, command, err, out)
		}
		return nil
	}
	if err := run("up"); err != nil {
		t.Fatal(errors.Join(err, run("down")))
	}
	t.Cleanup(func() {
		if err := run("down"); err != nil {
			t.Error(err)
		}
	})
}

// A pod reaches an address answered in its network's namespace, and that
// namespace no longer answers for the pod's own address.
func TestPodReachesItsNetworksNamespace(t *testing.T) {
	networkUp(t, testNetwork)
	a := addPod(t, "podnet-test", "shared", "10.62.250.3")
	l, err := podnet.Listen(testNetwork.Namespace(), "10.62.250.4:0")
	if err != nil {
		t.Fatal(err)
	}
	answer(t, l, "shared")
	c, err := podnet.Dial(a.Netns, l.Addr().String())
	if got := read(t, c, err); got != "shared" {
		t.Errorf("from the pod, %s answered %q", l.Addr(), got)
	}
}

// Remove leaves no namespace, link or route, and a second Remove is no error.
func TestRemove(t *testing.T) {
	RequireRoot(t)
	p, err := podnet.AddPod("podnet-test", "gone", "10.0.250.5")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join("/run/netns", p.Netns)); !os.IsNotExist(err) {
		t.Errorf("namespace %s: %v", p.Netns, err)
	}
	if _, err := net.InterfaceByName(p.Link); err == nil {
		t.Errorf("link %s is left", p.Link)
	}
	out, err := exec.Command("ip", "-o", "route", "show", p.IP+"/32").CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("the route to %s: %q, %v", p.IP, out, err)
	}
}

// An address the cluster gave again, to a pod made before the first one's
// namespace went, stays the new pod's when the first is removed.
func TestAddressGivenAgain(t *testing.T) {
	networkUp(t, testNetwork)
	old, err := podnet.AddPod("podnet-test", "old", "10.62.250.6")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := old.Remove(); err != nil {
			t.Error(err)
		}
	})
	fresh := addPod(t, "podnet-test", "new", "10.62.250.6")
	if err := old.Remove(); err != nil {
		t.Fatal(err)
	}
	l, err := podnet.Listen(fresh.Netns, "0.0.0.0:8080")
	if err != nil {
		t.Fatal(err)
	}
	answer(t, l, "new")
	c, err := net.Dial("tcp", fresh.IP+":8080")
	if got := read(t, c, err); got != "new" {
		t.Errorf("%s:8080 answered %q", fresh.IP, got)
	}
	ns := testNetwork.Namespace()
	out, err := exec.Command("ip", "-n", ns, "-o", "route", "show", "table", "local", fresh.IP+"/32").Output()
	if err != nil || len(out) == 0 {
		t.Errorf("%s's route back to the host in %s: %q, %v", fresh.IP, ns, out, err)
	}
}
