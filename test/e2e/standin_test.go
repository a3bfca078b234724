//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// What make run shows of xDS: the gateway samples, and the stand-in proxies
// it starts for their fleet (hack/standin, with hack/run.sh's arguments).
// Each of the fleet's Running pods gets a real ADS client, named as the pod,
// over the fleet's mutual TLS: kubectl envoy proxy-status lists them SYNCED,
// and the EnvoyConfigs count them acked. Stopped, they are gone from both.
func TestStandInsOfTheGatewaySample(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-standin")
	applyGatewaySamples(t, ns)
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/web-gateway", "{.status.availableReplicas}", "2")
	// The stand-ins are the pods that run and are not being deleted, as
	// the API server lists them (the Envoy's status counts them from the
	// Deployment's): wait for both.
	var pods []string
	framework.Eventually(t, time.Minute, "the fleet's 2 Running pods", func() (bool, error) {
		out, err := kubectl.Out("-n", ns, "get", "pods", "-l", "app.kubernetes.io/instance=web-gateway", "--field-selector=status.phase=Running",
			"-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}`)
		if err != nil {
			return false, err
		}
		pods = nil
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 1 {
				pods = append(pods, f[0])
			}
		}
		return len(pods) == 2, fmt.Errorf("Running pods %v", pods)
	})
	slices.Sort(pods)

	cmd := exec.Command(build(t, "./hack/standin"), "--namespace", ns, "--fleet", "web-gateway", "--xds-address", os.Getenv("E2E_XDS_ADDR"))
	log := filepath.Join(t.TempDir(), "standin.log")
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("the stand-ins' log:\n%s", b)
		}
	})
	// running fails the wait at once if the stand-ins exit.
	running := func() error {
		select {
		case err := <-exited:
			stopped = true
			b, _ := os.ReadFile(log)
			return framework.Unexpected("the stand-ins exited: %v\n%s", err, b)
		default:
			return nil
		}
	}

	run := plugin(t)
	addr := debugAddr(t)
	fleet := ns + "/web-gateway"
	var rows []debug.ProxyRow
	framework.Eventually(t, time.Minute, "proxy-status -A to list the fleet's pods SYNCED", func() (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		all, err := proxyRows(func(args ...string) (string, error) { return run(append(args, "--operator-address", addr)...) }, "-A")
		if err != nil {
			return false, err
		}
		rows, err = nil, nil
		var nodes []string
		for _, r := range all {
			if r.Fleet != fleet {
				continue
			}
			rows = append(rows, r)
			nodes = append(nodes, r.Node)
			if r.State != debug.Synced {
				err = fmt.Errorf("%s is %s", r.Node, r.State)
			}
		}
		slices.Sort(nodes)
		if err != nil {
			return false, err
		}
		return slices.Equal(nodes, pods), fmt.Errorf("proxies %v, want the pods %v", nodes, pods)
	})
	for _, r := range rows {
		var types []string
		for _, ts := range r.Types {
			types = append(types, ts.Type)
		}
		slices.Sort(types)
		if want := []string{"clusters", "endpoints", "listeners", "routes", "secrets"}; !slices.Equal(types, want) {
			t.Errorf("%s asked for %v, want every type the fleet is served %v", r.Node, types, want)
		}
	}
	for _, ec := range []string{"web-routing", "web-canary", "web-tls"} {
		kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/"+ec, "{.status.proxies.connected}/{.status.proxies.acked}", "2/2")
	}

	// Stopped as make run stops them, they leave.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := <-exited; err != nil {
		b, _ := os.ReadFile(log)
		t.Errorf("the stand-ins did not exit cleanly on SIGTERM: %v\n%s", err, b)
	}
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/web-routing", "{.status.proxies.connected}", "0")
}
