package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// runPlugin runs the plugin with args, as main does: its exit code, stdout
// and stderr (with the error main prints).
func runPlugin(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	code, err := exitStatus(cmd.Execute())
	if err != nil {
		errOut.WriteString("error: " + err.Error() + "\n")
	}
	return code, out.String(), errOut.String()
}

// writeFiles writes files into a new directory and returns its path.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	// otherCluster is a second EnvoyConfig of the fleet edge, with a cluster
	// nothing uses.
	otherCluster = `apiVersion: example.com/v1
kind: EnvoyConfig
metadata:
  name: spare
spec:
  envoyRef: edge
  resources:
    clusters:
    - {name: spare, type: STATIC, connect_timeout: 1s}
`
	// spareAdded is how diff shows otherCluster's cluster added.
	spareAdded = `    + spare
        {
          "name": "spare",
          "type": "STATIC",
          "connect_timeout": "1s"
        }
`
	// inlineKeyConfig holds a private key inline, as an EnvoyConfig stored
	// before admission refused that may.
	inlineKeyConfig = `apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: keys}
spec:
  envoyRef: edge
  resources:
    secrets:
    - {name: s, tls_certificate: {certificate_chain: {inline_string: PUBLIC-CHAIN}, private_key: {inline_string: PRIVATE-KEY}}}
`
)

var fleetVersions = regexp.MustCompile(`version (\S+) -> (\S+)`)

// numberVersions replaces the versions of out's fleets, content hashes, by
// v1, v2, ... in the order they first appear: what the tests hold is which
// are the same.
func numberVersions(out string) string {
	numbers := map[string]string{"-": "-"}
	number := func(v string) string {
		if _, ok := numbers[v]; !ok {
			numbers[v] = fmt.Sprintf("v%d", len(numbers))
		}
		return numbers[v]
	}
	return fleetVersions.ReplaceAllStringFunc(out, func(line string) string {
		m := fleetVersions.FindStringSubmatch(line)
		return "version " + number(m[1]) + " -> " + number(m[2])
	})
}

// Offline, diff compares the files with nothing or with --against, and
// tells with its exit code whether anything would change (0, 1), whether
// admission would refuse part of it (3), or that it failed (2). Each case's
// output is whole.
func TestDiffOffline(t *testing.T) {
	fleet := listenerConfig + "---\n" + routesConfig + "---\n" + clusterConfig
	slower := strings.Replace(clusterConfig, "connect_timeout: 1s", "connect_timeout: 2s", 1)
	elsewhere := strings.Replace(routesConfig, "route: {cluster: backend}", "route: {cluster: spare}", 1)
	tests := []struct {
		name    string
		against map[string]string // none: --offline
		files   map[string]string
		args    []string
		code    int
		stdout  string
	}{
		{name: "against nothing: every resource is added", files: map[string]string{"a.yaml": clusterConfig}, code: 1, stdout: `fleet team/edge: version - -> v1
  clusters: 1 added
    + backend
        {
          "name": "backend",
          "type": "EDS",
          "eds_cluster_config": {
            "eds_config": {
              "ads": {},
              "resource_api_version": "V3"
            }
          },
          "connect_timeout": "1s"
        }
`},
		{name: "the same files: nothing changes", against: map[string]string{"a.yaml": fleet}, files: map[string]string{"a.yaml": fleet}, code: 0,
			stdout: "fleet team/edge: version v1 -> v1\n  no change to what its proxies are served\n"},
		{name: "a field changes", against: map[string]string{"a.yaml": fleet}, files: map[string]string{"b.yaml": slower}, code: 1, stdout: `fleet team/edge: version v1 -> v2
  clusters: 1 changed
    ~ backend
        ~ connect_timeout: "1s" -> "2s"
`},
		{name: "a route to a cluster that does not exist is refused, in the webhook's words, and not served",
			against: map[string]string{"a.yaml": fleet}, files: map[string]string{"b.yaml": elsewhere + "---\n" + slower}, code: 3, stdout: `fleet team/edge: version v1 -> v2
  clusters: 1 changed
    ~ backend
        ~ connect_timeout: "1s" -> "2s"

admission would refuse:
  DIR/b.yaml (document 1): EnvoyConfig routes is invalid: spec.resources.routes[0] ("routes"): cluster "spare" does not exist
`},
		{name: "in order, as kubectl apply: the cluster first, then the route that uses it",
			against: map[string]string{"a.yaml": fleet}, files: map[string]string{"b.yaml": otherCluster + "---\n" + elsewhere}, code: 1, stdout: `fleet team/edge: version v1 -> v2
  routes: 1 changed
    ~ routes
        ~ virtual_hosts[name=all].routes[0].route.cluster: "backend" -> "spare"
  clusters: 1 added
` + spareAdded},
		{name: "--prune deletes what the files leave out of their fleets", args: []string{"--prune"},
			against: map[string]string{"a.yaml": fleet + "---\n" + otherCluster}, files: map[string]string{"a.yaml": fleet}, code: 1,
			stdout: "fleet team/edge: version v1 -> v2\n  clusters: 1 removed\n    - spare\n"},
		{name: "--prune: a deletion that would break a route is refused", args: []string{"--prune"},
			against: map[string]string{"a.yaml": fleet}, files: map[string]string{"a.yaml": listenerConfig + "---\n" + routesConfig}, code: 3, stdout: `fleet team/edge: version v1 -> v1
  no change to what its proxies are served

admission would refuse:
  --prune: EnvoyConfig cluster cannot be deleted: it would break EnvoyConfig team/routes: spec.resources.routes[0] ("routes"): cluster "backend" does not exist
`},
		{name: "without --prune, nothing is deleted",
			against: map[string]string{"a.yaml": fleet + "---\n" + otherCluster}, files: map[string]string{"a.yaml": fleet}, code: 0,
			stdout: "fleet team/edge: version v1 -> v1\n  no change to what its proxies are served\n"},
		{name: "an EnvoyConfig that moves to another fleet: both fleets",
			against: map[string]string{"a.yaml": otherCluster}, files: map[string]string{"a.yaml": strings.Replace(otherCluster, "envoyRef: edge", "envoyRef: other", 1)}, code: 1,
			stdout: `fleet team/edge: version v1 -> v2
  clusters: 1 removed
    - spare
fleet team/other: version - -> v3
  clusters: 1 added
` + spareAdded},
		{name: "a name another EnvoyConfig has: the older one's resource is served, and a note says so",
			against: map[string]string{"a.yaml": clusterConfig}, files: map[string]string{"a.yaml": strings.Replace(strings.Replace(slower, "name: cluster", "name: newer", 1), "connect_timeout: 2s", "connect_timeout: 3s", 1)}, code: 0,
			stdout: `fleet team/edge: version v1 -> v2
  no change to what its proxies are served
  note: EnvoyConfig team/newer: cluster "backend" (spec.resources.clusters[0]) is also defined by EnvoyConfig team/cluster, which is older and wins
`},
		{name: "an EnvoyConfig that does not decode is refused as the API server refuses it",
			files: map[string]string{"a.yaml": strings.Replace(clusterConfig, "envoyRef: edge", "envoyRef: edge\n  envoyRefs: edge", 1) + "---\n" + otherCluster}, code: 3,
			stdout: `fleet team/edge: version - -> v1
  clusters: 1 added
` + spareAdded + `
admission would refuse:
  DIR/a.yaml (document 1): EnvoyConfig cluster: error unmarshaling JSON: while decoding JSON: json: unknown field "envoyRefs"
`},
		{name: "a private key inline is refused",
			files: map[string]string{"a.yaml": inlineKeyConfig}, code: 3, stdout: `fleet team/edge: version - -> -
  no change to what its proxies are served

admission would refuse:
  DIR/a.yaml (document 1): EnvoyConfig keys is invalid: spec.resources.secrets[0] ("s"): tls_certificate.private_key.inline_string holds secret material inline, which an EnvoyConfig may not: serve a certificate and its key from a kubernetes.io/tls Secret labelled kube-envoy-controller.io/xds-secret: tls, named in spec.tlsSecrets
`},
		{name: "an EnvoyConfig stored with a key inline may lose it, and --prune drops what the files leave out", args: []string{"--prune"},
			against: map[string]string{"a.yaml": inlineKeyConfig}, files: map[string]string{"a.yaml": strings.Replace(otherCluster, "name: spare\nspec", "name: keys\nspec", 1)}, code: 1,
			stdout: `fleet team/edge: version v1 -> v2
  clusters: 1 added
` + spareAdded + `  secrets: 1 removed
    - s
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			args := append([]string{"diff", "-n", "team", "-f", dir}, tt.args...)
			if tt.against == nil {
				args = append(args, "--offline")
			} else {
				args = append(args, "--against", writeFiles(t, tt.against))
			}
			code, stdout, stderr := runPlugin(t, "", args...)
			stdout = numberVersions(strings.ReplaceAll(stdout, dir, "DIR"))
			if code != tt.code || stdout != tt.stdout {
				t.Errorf("exit %d, want %d; stdout:\n%s\nwant:\n%s\nstderr: %s", code, tt.code, stdout, tt.stdout, stderr)
			}
		})
	}
}

// -o json holds the report whole, for tools: versions, every change with
// its fields' old and new values as JSON, and the refusals.
func TestDiffJSON(t *testing.T) {
	against := writeFiles(t, map[string]string{"a.yaml": clusterConfig})
	files := writeFiles(t, map[string]string{"a.yaml": strings.Replace(clusterConfig, "connect_timeout: 1s", "connect_timeout: 2s", 1) + "---\n" +
		strings.Replace(routesConfig, "route: {cluster: backend}", "route: {cluster: spare}", 1)})
	code, stdout, stderr := runPlugin(t, "", "diff", "-n", "team", "--against", against, "-f", files, "-o", "json")
	if code != exitRefused {
		t.Fatalf("exit %d, want %d: %s%s", code, exitRefused, stdout, stderr)
	}
	var r diffReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(r.Fleets) != 1 || r.Fleets[0].Fleet != "team/edge" || len(r.Fleets[0].Version) != 16 || len(r.Fleets[0].NewVersion) != 16 {
		t.Fatalf("fleets: %+v", r.Fleets)
	}
	types := r.Fleets[0].Types
	if len(types) != 1 || types[0].Type != "clusters" || len(types[0].Changed) != 1 || len(types[0].Changed[0].Fields) != 1 {
		t.Fatalf("types: %+v", types)
	}
	if f := types[0].Changed[0].Fields[0]; f.Path != "connect_timeout" || string(f.Old) != `"1s"` || string(f.New) != `"2s"` {
		t.Errorf("field: %+v", f)
	}
	if len(r.Refused) != 1 || r.Refused[0].EnvoyConfig != "team/routes" || !strings.HasPrefix(r.Refused[0].Message, "EnvoyConfig routes is invalid: ") {
		t.Errorf("refused: %+v", r.Refused)
	}
}

// - reads the files from stdin.
func TestDiffStdin(t *testing.T) {
	code, stdout, stderr := runPlugin(t, clusterConfig, "diff", "-n", "team", "--offline", "-f", "-")
	if code != exitChanges || !strings.HasPrefix(stdout, "fleet team/edge: version - -> ") || !strings.Contains(stdout, "+ backend") {
		t.Errorf("exit %d: %s%s", code, stdout, stderr)
	}
}

// Whatever keeps diff from comparing exits 2, with what went wrong.
func TestDiffErrors(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t)
	files := writeFiles(t, map[string]string{"a.yaml": clusterConfig})
	noConfigs := writeFiles(t, map[string]string{"a.yaml": service})
	routes := writeFiles(t, map[string]string{"a.yaml": webRoute})
	badAgainst := writeFiles(t, map[string]string{"a.yaml": strings.Replace(clusterConfig, "envoyRef: edge", "envoyRef: edge\n  envoyRefs: edge", 1)})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"diff"}, "-f is required"},
		{[]string{"diff", "-f", files, "extra"}, `unknown command "extra"`},
		{[]string{"diff", "-f", files, "--unknown"}, "unknown flag: --unknown"},
		{[]string{"diff", "-f", files, "-o", "wide"}, `unknown output format "wide": want text, json or yaml`},
		{[]string{"diff", "-f", filepath.Join(files, "missing.yaml")}, "no such file or directory"},
		{[]string{"diff", "--offline", "-f", noConfigs}, "no EnvoyConfig or Gateway API object found in the files (1 other document(s) skipped)"},
		{[]string{"diff", "--offline", "-f", routes}, "--offline compares EnvoyConfigs only"},
		{[]string{"diff", "--against", badAgainst, "-f", files}, `--against: ` + badAgainst + `/a.yaml (document 1): EnvoyConfig cluster: error unmarshaling JSON`},
		{[]string{"diff", "-f", files}, "listing the EnvoyConfigs of namespace team: "},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runPlugin(t, "", append(tt.args, "--kubeconfig", kubeconfig, "--timeout", "10s")...)
			if code != exitError || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q, want %d and %q; stdout %q", code, stderr, exitError, tt.want, stdout)
			}
		})
	}
}

// With --envoy, a real Envoy loads what each fleet would be served: a fleet
// it loads says so in a note, and one it refuses is listed in Envoy's
// words, with exit status 3.
func TestDiffWithEnvoy(t *testing.T) {
	envoy := realenvoy.Require(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	sample := func(name string) string { return filepath.Join(root, "config", "samples", name) }
	code, stdout, stderr := runPlugin(t, "", "diff", "--offline", "-f", sample("example_v1_envoyconfig_http.yaml"), "--envoy="+envoy)
	if code != exitChanges || !strings.Contains(stdout, "note: Envoy 1.40.0 loads what the fleet would be served") {
		t.Errorf("the routing sample: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runPlugin(t, "", "diff", "--offline", "-f", sample("example_v1_envoyconfig_grpc.yaml"), "--envoy="+envoy, "-o", "json")
	var r diffReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %s%s", err, stdout, stderr)
	}
	if code != exitRefused || len(r.EnvoyRefused) != 1 || r.EnvoyRefused[0].Where != "fleet default/greeter-mesh" ||
		!strings.HasPrefix(r.EnvoyRefused[0].Message, "Envoy 1.40.0 refuses what it would be served: error adding listener named 'greeter': missing the API listener extension") {
		t.Errorf("the proxyless sample: exit %d, %+v\n%s", code, r.EnvoyRefused, stderr)
	}
}
