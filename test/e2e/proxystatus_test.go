//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

var (
	builtMu sync.Mutex
	builtBy = map[string]string{} // package → binary
)

// build builds the command of package pkg (./cmd/kubectl-envoy) once for
// the package's tests, into tmp/ of the repository (overwritten by the next
// run), and returns the binary's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	builtMu.Lock()
	defer builtMu.Unlock()
	if bin, ok := builtBy[pkg]; ok {
		return bin
	}
	bin := filepath.Join(os.Getenv("E2E_ROOT"), "tmp", filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = os.Getenv("E2E_ROOT")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v: %s", pkg, err, out)
	}
	builtBy[pkg] = bin
	return bin
}

// plugin builds kubectl-envoy and returns a function that runs it with args
// (and KUBECONFIG, the cluster's admin).
func plugin(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	bin := build(t, "./cmd/kubectl-envoy")
	return func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("kubectl-envoy %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
}

// debugAddr is the host operator's debug endpoint (hack/e2e.sh's
// --debug-bind-address).
func debugAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("E2E_DEBUG_ADDR")
	if addr == "" {
		t.Fatal("E2E_DEBUG_ADDR is not set: hack/e2e.sh sets it to the operator's --debug-bind-address")
	}
	return addr
}

// applyFleet applies an Envoy edge and an EnvoyConfig with one cluster in
// ns, and waits until the configuration is published.
func applyFleet(t *testing.T, ns string) {
	t.Helper()
	kubectl.Apply(t, ns, `
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
`)
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/edge", `{.status.conditions[?(@.type=="Published")].status}`, "True")
}

// proxyRows runs proxy-status with args and -o json, and returns its rows by node.
func proxyRows(run func(...string) (string, error), args ...string) (map[string]debug.ProxyRow, error) {
	out, err := run(append([]string{"proxy-status", "-o", "json"}, args...)...)
	if err != nil {
		return nil, err
	}
	var l struct{ Proxies []debug.ProxyRow }
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	rows := map[string]debug.ProxyRow{}
	for _, r := range l.Proxies {
		rows[r.Node] = r
	}
	return rows, nil
}

// kubectl envoy proxy-status shows, from the live operator, a proxy that
// accepted its fleet's configuration as SYNCED and one that rejected it as
// NACKED with its reason; config-dump shows what the fleet is served.
func TestPluginProxyStatus(t *testing.T) {
	t.Parallel()
	plain := plugin(t)
	addr := debugAddr(t)
	run := func(args ...string) (string, error) { return plain(append(args, "--operator-address", addr)...) }
	ns := namespace(t, "e2e-plugin")
	applyFleet(t, ns)

	// The fleet is read with the typed client: one that does not exist is
	// an error, and one without proxies says so.
	if out, err := run("proxy-status", "no-such-fleet", "-n", ns); err == nil || !strings.Contains(out, `"no-such-fleet" not found`) {
		t.Errorf("proxy-status of a fleet that does not exist: %v\n%s", err, out)
	}
	if out, err := run("proxy-status", "edge", "-n", ns); err != nil || !strings.Contains(out, "no proxy of fleet "+ns+"/edge is connected") {
		t.Errorf("proxy-status of a fleet without proxies: %v\n%s", err, out)
	}

	synced := xdstest.Connect(t, dialAsFleet(t, ns, "edge"), ns+"/edge", "proxy-synced", resourcev3.ClusterType)
	if _, err := synced.Next(""); err != nil {
		t.Fatal(err)
	}
	nacked := xdstest.Connect(t, dialAsFleet(t, ns, "edge"), ns+"/edge", "proxy-nacked", resourcev3.ClusterType)
	if _, err := nacked.Next("e2e: cluster plugin-backend is not wanted here"); err != nil {
		t.Fatal(err)
	}

	var rows map[string]debug.ProxyRow
	framework.Eventually(t, time.Minute, "proxy-status to show both proxies as they answered", func() (bool, error) {
		var err error
		rows, err = proxyRows(run, "-n", ns)
		return err == nil && rows["proxy-synced"].State == debug.Synced && rows["proxy-nacked"].State == debug.NACKed, err
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

// The way users reach the operator: kubectl-envoy finds the operator's pods
// and forwards a port to each through the API server, with nothing but the
// RBAC shipped in config/rbac/debug_client_role.yaml. KWOK runs no
// containers: the operator's pod is a stand-in, and KWOK's PortForward (the
// cluster is made with it enabled) sends its debug port to the operator
// running on this host.
func TestPluginThroughPortForward(t *testing.T) {
	t.Parallel()
	run := plugin(t)
	const operatorNS = "kube-envoy-controller"
	ns := namespace(t, "e2e-plugin-pf")
	applyFleet(t, ns)
	host, port, err := net.SplitHostPort(debugAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	standIn := filepath.Join(t.TempDir(), "stand-in.yaml")
	if err := os.WriteFile(standIn, []byte(`
apiVersion: v1
kind: Pod
metadata:
  name: e2e-operator-stand-in
  labels: {app.kubernetes.io/name: kube-envoy-controller}
spec:
  containers:
  - name: manager
    image: kube-envoy-controller
    ports: [{name: debug, containerPort: 8444}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: PortForward
metadata: {name: e2e-operator-stand-in}
spec:
  forwards:
  - ports: [8444]
    target: {address: `+host+`, port: `+port+`}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl.Run(t, "-n", operatorNS, "apply", "-f", standIn)
	t.Cleanup(func() { _, _ = kubectl.Out("-n", operatorNS, "delete", "--wait=false", "-f", standIn) })
	kubectl.WaitJSONPath(t, time.Minute, operatorNS, "pod/e2e-operator-stand-in", "{.status.phase}", "Running")

	// A user with the shipped roles only: the debug client's in the
	// operator's namespace, the proxy viewer's in the fleet's.
	kubectl.Run(t, "-n", operatorNS, "apply", "-f", filepath.Join(os.Getenv("E2E_ROOT"), "config", "rbac", "debug_client_role.yaml"))
	kubectl.Run(t, "-n", ns, "create", "serviceaccount", "viewer")
	kubectl.Run(t, "-n", operatorNS, "create", "rolebinding", "e2e-plugin-viewer", "--role", "kube-envoy-controller-debug-client", "--serviceaccount", ns+":viewer")
	t.Cleanup(func() { _, _ = kubectl.Out("-n", operatorNS, "delete", "rolebinding", "e2e-plugin-viewer") })
	kubeconfig := tokenKubeconfig(t, kubectl.Run(t, "-n", ns, "create", "token", "viewer"))

	proxy := xdstest.Connect(t, dialAsFleet(t, ns, "edge"), ns+"/edge", "proxy-pf", resourcev3.ClusterType)
	if _, err := proxy.Next(""); err != nil {
		t.Fatal(err)
	}

	// Without a grant in the fleet's namespace, its rows are left out. The
	// API server authorizes the debug client's new RoleBinding once its
	// informer has it: until then the plugin may be refused.
	var rows map[string]debug.ProxyRow
	framework.Eventually(t, time.Minute, "the viewer's proxy-status -A to answer", func() (bool, error) {
		var err error
		rows, err = proxyRows(run, "-A", "--kubeconfig", kubeconfig)
		return err == nil, err
	})
	if len(rows) != 0 {
		t.Errorf("rows of namespaces the viewer may not read: %+v", rows)
	}
	if out, err := run("proxy-status", "edge", "-n", ns, "--kubeconfig", kubeconfig); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("a named fleet the viewer may not read: %v\n%s", err, out)
	}

	kubectl.Run(t, "-n", ns, "create", "rolebinding", "viewer", "--clusterrole", "kube-envoy-controller-proxy-viewer", "--serviceaccount", ns+":viewer")
	framework.Eventually(t, time.Minute, "the viewer to see the fleet's proxy, through the stand-in's forwarded port", func() (bool, error) {
		var err error
		rows, err = proxyRows(run, "-A", "--kubeconfig", kubeconfig)
		return err == nil && rows["proxy-pf"].State == debug.Synced, err
	})
	for node, r := range rows {
		if !strings.HasPrefix(r.Fleet, ns+"/") {
			t.Errorf("the viewer sees %s of %s", node, r.Fleet)
		}
	}
}

// tokenKubeconfig writes a kubeconfig for the cluster of KUBECONFIG that
// authenticates with token alone.
func tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = cluster
	cfg.AuthInfos["viewer"] = &clientcmdapi.AuthInfo{Token: strings.TrimSpace(token)}
	cfg.Contexts["viewer"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "viewer"}
	cfg.CurrentContext = "viewer"
	path := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
