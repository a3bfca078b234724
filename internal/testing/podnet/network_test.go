package podnet

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hack/podnet.sh makes network N with the names and addresses Network
// derives from N: the two say the same, for every N.
func TestNetworkAsTheScriptMakesIt(t *testing.T) {
	script := filepath.Join("..", "..", "..", "hack", "podnet.sh")
	for _, n := range []Network{0, 1, 2, 3, 62, Networks - 1} {
		c := exec.Command(script, "names")
		c.Env = []string{fmt.Sprintf("PODNET=%d", n), "PATH=/usr/bin:/bin"}
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("PODNET=%d hack/podnet.sh names: %v: %s", n, err, out)
		}
		want := strings.Join([]string{
			"namespace " + n.Namespace(),
			"cidr " + n.CIDR().String(),
			fmt.Sprintf("host-link kecpodsh%d %s", n, n.hostAddr()),
			fmt.Sprintf("namespace-link %s 169.254.99.%d", n.link(), 4*int(n)+2),
			"load-balancers " + n.LoadBalancers().String(),
		}, "\n") + "\n"
		if string(out) != want {
			t.Errorf("PODNET=%d: hack/podnet.sh names says\n%s\nNetwork says\n%s", n, out, want)
		}
	}
	c := exec.Command(script, "names")
	c.Env = []string{fmt.Sprintf("PODNET=%d", Networks), "PATH=/usr/bin:/bin"}
	if out, err := c.CombinedOutput(); err == nil {
		t.Errorf("PODNET=%d: hack/podnet.sh names took it: %s", Networks, out)
	}
}

// Current reads PODNET, refusing what names no network; NetworkOf finds an
// address's network.
func TestCurrentAndNetworkOf(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want Network
		err  bool
	}{{"", 0, false}, {"0", 0, false}, {"3", 3, false}, {"63", 63, false}, {"64", 0, true}, {"-1", 0, true}, {"x", 0, true}} {
		t.Setenv("PODNET", tc.env)
		got, err := Current()
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("PODNET=%q: Current() = %d, %v", tc.env, got, err)
		}
	}
	for ip, want := range map[string]Network{"10.0.1.2": 0, "10.3.250.1": 3, "10.63.0.1": 63} {
		if got, ok := NetworkOf(netip.MustParseAddr(ip)); !ok || got != want {
			t.Errorf("NetworkOf(%s) = %d, %v; want %d", ip, got, ok, want)
		}
	}
	for _, ip := range []string{"10.64.0.1", "192.168.0.1", "fd00::1"} {
		if n, ok := NetworkOf(netip.MustParseAddr(ip)); ok {
			t.Errorf("NetworkOf(%s) = %d, want none", ip, n)
		}
	}
}
