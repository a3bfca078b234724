package xds

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kube-envoy-controller/kube-envoy-controller"

// stages are the rooms of internal/xds in their order, each with the rooms
// it may import: none later than itself. history and report stand side by
// side after publish, whose history and answers they keep: the controller
// uses both, the server writes reports, the debug endpoint reads
// histories; history/store, which reads and writes the histories in the
// API server, stands after history, as the debug endpoint does after
// debug. authority, the xDS CA, stands aside: only the runtime uses it.
// cache, what the server serves and the protocol's answers, stands just
// before the server, the one room that uses it. analysis, the judgement
// of a rollout's step by its proxies' figures, is pure and imports no
// room; publish judges a rollout's steps with it and records its verdicts; stats, the receiver of those figures, is a runtime stage beside
// the server (served on its port, importing neither it nor anything of
// it), and hands them to analysis, and to the server as publish's
// windows, which the server reports.
var stages = []struct {
	name string
	may  []string
}{
	{"resource", nil},
	{"analysis", nil},
	{"translate", []string{"resource"}},
	{"gateway", []string{"resource", "translate"}},
	{"publish", []string{"resource", "translate", "analysis"}},
	{"history", []string{"resource", "translate", "publish"}},
	{"history/store", []string{"resource", "translate", "publish", "history"}},
	{"report", []string{"publish"}},
	{"authority", nil},
	{"cache", []string{"resource", "publish"}},
	{"server", []string{"resource", "translate", "publish", "report", "authority", "cache"}},
	{"stats", []string{"analysis", "publish"}},
	{"debug", []string{"resource", "translate", "publish"}},
	{"debug/endpoint", []string{"resource", "translate", "publish", "history", "server", "debug"}},
}

// runtimeOnly are what only the ADS runtime and the debug endpoint may link:
// go-control-plane's server, and the packages of ours that run the server
// or serve on its port.
var runtimeOnly = []string{
	"github.com/envoyproxy/go-control-plane/pkg/server/",
	module + "/internal/xds/cache",
	module + "/internal/xds/server",
	module + "/internal/xds/stats",
	module + "/internal/xds/debug/endpoint",
}

// metricsImports are the imports that register or serve metrics: only the
// runtime's packages of ours may import them.
var metricsImports = []string{
	"github.com/prometheus/client_golang/",
	"sigs.k8s.io/controller-runtime/pkg/metrics",
}

// apiClients are client-go and controller-runtime, the libraries that talk
// to the API server.
var apiClients = []string{"sigs.k8s.io/controller-runtime/", "k8s.io/client-go/"}

// noIO are the rooms that read and write nothing themselves: the decision
// (and the judgement of a rollout's step), the formats of what is recorded and reported, and the server's cache,
// which holds what it serves in memory. history/store, the server and the
// debug endpoint do the reading and writing. They link no client either,
// through any package (TestPureStagesLinkNoClientNorMetric).
var noIO = []string{"resource", "analysis", "translate", "gateway", "publish", "history", "report", "debug", "cache"}

// pure are the stages before the runtime, and kubectl envoy, which reads
// what they give.
var pure = []string{"internal/xds/resource", "internal/xds/analysis", "internal/xds/translate", "internal/xds/gateway", "internal/xds/publish", "internal/xds/history", "internal/xds/report", "internal/xds/debug", "cmd/kubectl-envoy"}

// deps returns, by import path, the imports of each package that pkgs link
// (go list -deps), tests left out.
func deps(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}
	for _, p := range pkgs {
		args = append(args, module+"/"+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		m[f[0]] = f[1:]
	}
	return m
}

func matches(path string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool {
		return path == strings.TrimSuffix(p, "/") || strings.HasPrefix(path, p)
	})
}

// No stage imports a later one: the arrows between the rooms of
// internal/xds all go one way.
func TestStagesImportOnlyEarlierStages(t *testing.T) {
	for _, s := range stages {
		pkg := "internal/xds/" + s.name
		for _, imp := range deps(t, pkg)[module+"/"+pkg] {
			room, ok := strings.CutPrefix(imp, module+"/internal/xds/")
			if !ok {
				continue
			}
			if !slices.Contains(s.may, room) {
				t.Errorf("%s imports %s: a stage imports only those before it (%v)", s.name, room, s.may)
			}
		}
	}
}

// The pure stages and kubectl envoy link no ADS server, and no package of
// ours among what they link registers or serves metrics.
func TestPureStagesLinkNoRuntime(t *testing.T) {
	for _, p := range pure {
		for dep, imports := range deps(t, p) {
			if matches(dep, runtimeOnly) {
				t.Errorf("%s links %s", p, dep)
			}
			if !strings.HasPrefix(dep, module+"/") {
				continue
			}
			for _, imp := range imports {
				if matches(imp, metricsImports) {
					t.Errorf("%s links %s, which imports %s", p, dep, imp)
				}
			}
		}
	}
}

// The pure stages link no client of the API server and no metric, through
// any package: the names they share with the rest come from internal/names,
// which imports nothing. (kubectl envoy, which reads the API server, is
// held to TestPluginLinksNoControllerRuntimeNorMetric.)
func TestPureStagesLinkNoClientNorMetric(t *testing.T) {
	for _, room := range noIO {
		pkg := "internal/xds/" + room
		for dep := range deps(t, pkg) {
			if matches(dep, apiClients) || matches(dep, metricsImports) {
				t.Errorf("%s links %s", room, dep)
			}
		}
	}
}

// The decision and the formats import no client of the API server: what
// is recorded and reported is read and written elsewhere.
func TestDecisionAndFormatsImportNoClient(t *testing.T) {
	for _, room := range noIO {
		pkg := "internal/xds/" + room
		for _, imp := range deps(t, pkg)[module+"/"+pkg] {
			if matches(imp, apiClients) {
				t.Errorf("%s imports %s: only history/store, the server and the debug endpoint talk to the API server", room, imp)
			}
		}
	}
}

// kubectl envoy reads the API server as kubectl plugins do, through
// client-go, cli-runtime and the generated clientset: none of the packages
// it links is controller-runtime, which registers metrics at init and
// brings a manager the plugin has no use for, nor a Prometheus library.
func TestPluginLinksNoControllerRuntimeNorMetric(t *testing.T) {
	forbidden := []string{"sigs.k8s.io/controller-runtime/", "github.com/prometheus/"}
	for dep := range deps(t, "cmd/kubectl-envoy") {
		if matches(dep, forbidden) {
			t.Errorf("kubectl envoy links %s", dep)
		}
	}
}
