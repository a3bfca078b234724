//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// plugin builds kubectl-envoy once for the test and returns a function that
// runs it against the operator on this host (hack/e2e.sh's
// E2E_DEBUG_ADDR), with the cluster's kubeconfig.
func plugin(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	addr := os.Getenv("E2E_DEBUG_ADDR")
	if addr == "" {
		t.Fatal("E2E_DEBUG_ADDR is not set: hack/e2e.sh sets it to the operator's --debug-bind-address")
	}
	bin := filepath.Join(t.TempDir(), "kubectl-envoy")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubectl-envoy")
	build.Dir = os.Getenv("E2E_ROOT")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-envoy: %v: %s", err, out)
	}
	return func(args ...string) (string, error) {
		out, err := exec.Command(bin, append(args, "--operator-address", addr)...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("kubectl-envoy %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
}

// kubectl envoy proxy-status shows, from the live operator, a proxy that
// accepted its fleet's configuration as SYNCED and one that rejected it as
// NACKED with its reason; config-dump shows what the fleet is served.
func TestPluginProxyStatus(t *testing.T) {
	run := plugin(t)
	ns := namespace(t, "e2e-plugin")
	f, err := os.CreateTemp(t.TempDir(), "fleet-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`
apiVersion: example.com/v1
kind: Envoy
metadata: {name: edge}
---
apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: edge}
spec:
  envoyRef: edge
  resources:
    clusters:
    - {name: plugin-backend, type: STATIC, connect_timeout: 1s}
`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	kubectl(t, "-n", ns, "apply", "-f", f.Name())
	waitJSONPath(t, time.Minute, ns, "envoyconfig/edge", `{.status.conditions[?(@.type=="Published")].status}`, "True")

	synced := xdstest.Connect(t, dialAsFleet(t, ns, "edge"), ns+"/edge", "proxy-synced", resourcev3.ClusterType)
	if _, err := synced.Next(""); err != nil {
		t.Fatal(err)
	}
	nacked := xdstest.Connect(t, dialAsFleet(t, ns, "edge"), ns+"/edge", "proxy-nacked", resourcev3.ClusterType)
	if _, err := nacked.Next("e2e: cluster plugin-backend is not wanted here"); err != nil {
		t.Fatal(err)
	}

	rows := map[string]debug.ProxyRow{}
	eventually(t, time.Minute, "proxy-status to show both proxies as they answered", func() (bool, error) {
		out, err := run("proxy-status", "-n", ns, "-o", "json")
		if err != nil {
			return false, err
		}
		var l struct{ Proxies []debug.ProxyRow }
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		clear(rows)
		for _, r := range l.Proxies {
			rows[r.Node] = r
		}
		return rows["proxy-synced"].State == debug.Synced && rows["proxy-nacked"].State == debug.NACKed, nil
	})
	if r := rows["proxy-nacked"]; r.Fleet != ns+"/edge" || r.NACK != "e2e: cluster plugin-backend is not wanted here" ||
		len(r.Types) != 1 || r.Types[0].Type != "clusters" || r.Types[0].NACKVersion != r.Types[0].Current {
		t.Errorf("the NACKed proxy's row: %+v", r)
	}
	if r := rows["proxy-synced"]; len(r.Types) != 1 || r.Types[0].Acked == "" || r.Types[0].Acked != r.Types[0].Current || r.Replica == "" {
		t.Errorf("the SYNCED proxy's row: %+v", r)
	}

	// The table, for one fleet.
	out, err := run("proxy-status", "edge", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"proxy-nacked", "NACKED", "e2e: cluster plugin-backend is not wanted here", "proxy-synced", "SYNCED"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no %q:\n%s", want, out)
		}
	}

	out, err = run("config-dump", "edge", "-n", ns, "--type", "clusters")
	if err != nil {
		t.Fatal(err)
	}
	var d debug.ConfigDump
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var cluster map[string]any
	if len(d.Resources["clusters"]) != 1 || json.Unmarshal(d.Resources["clusters"][0], &cluster) != nil ||
		cluster["name"] != "plugin-backend" || cluster["connect_timeout"] != "1s" {
		t.Errorf("config-dump: %s", out)
	}

	out, err = run("version")
	if err != nil || !strings.Contains(out, "operator") {
		t.Errorf("version: %v\n%s", err, out)
	}
}
