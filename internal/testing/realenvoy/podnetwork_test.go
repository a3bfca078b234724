package realenvoy

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// Two proxies of one fleet, each in its pod's own network namespace, bind
// the same admin port, each answers at its pod's address as itself, and
// each dials the xDS server given on the host's loopback, from its pod's
// address.
func TestRunPod(t *testing.T) {
	bin := Require(t)
	if err := podnet.Root(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("SKIPPED: %v", err)
	}
	// The xDS server stands in as a listener on every address of the host,
	// as the operator's listens, that records who dials it.
	xds, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = xds.Close() })
	var mu sync.Mutex
	dialed := map[string]bool{}
	go func() {
		for {
			c, err := xds.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			mu.Lock()
			dialed[host] = true
			mu.Unlock()
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(xds.Addr().String())

	pod, cms, secrets := fleetPod(t, gateway(), builtin)
	var procs []*Process
	for i, ip := range []string{"10.0.253.1", "10.0.253.2"} {
		pod := pod.DeepCopy()
		pod.Name += string(rune('a' + i))
		net, err := podnet.AddPod(pod.Namespace, pod.Name, ip)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := net.Remove(); err != nil {
				t.Error(err)
			}
		})
		p, err := FromPod(pod, cms, secrets)
		if err != nil {
			t.Fatal(err)
		}
		root := filepath.Join(t.TempDir(), pod.Name)
		log, err := os.Create(root + ".log")
		if err != nil {
			t.Fatal(err)
		}
		proc, err := RunPod(bin, p, net, root, "127.0.0.1:"+port, false, log)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanups run last first: Envoy stops before its namespace goes.
		t.Cleanup(func() { proc.Stop(5 * time.Second); _ = log.Close() })
		if want := "http://" + ip + ":19000"; proc.Admin != want {
			t.Errorf("Admin = %s, want %s", proc.Admin, want)
		}
		procs = append(procs, proc)
	}
	for _, proc := range procs {
		testenv.Eventually(t, "Envoy "+proc.Pod+" to answer at "+proc.Admin, func() (bool, error) {
			if done, err := proc.Exited(); done {
				return false, testenv.Unexpected("Envoy %s exited: %v", proc.Pod, err)
			}
			info, err := proc.Get(context.Background(), "/server_info")
			if err != nil {
				return false, err
			}
			if !strings.Contains(info, `"id": "`+proc.Pod+`"`) {
				return false, testenv.Unexpected("%s answers as another: %s", proc.Admin, info)
			}
			return true, nil
		})
		ip := strings.TrimSuffix(strings.TrimPrefix(proc.Admin, "http://"), ":19000")
		testenv.Eventually(t, "Envoy "+proc.Pod+" to dial the xDS server from "+ip, func() (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return dialed[ip], nil
		})
	}
}
