package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

const (
	listenerConfig = `apiVersion: example.com/v1
kind: EnvoyConfig
metadata:
  name: listener
spec:
  envoyRef: edge
  resources:
    listeners:
    - name: http
      address: {socket_address: {address: 0.0.0.0, port_value: 8080}}
      filter_chains:
      - filters:
        - name: envoy.filters.network.http_connection_manager
          typed_config:
            '@type': type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
            stat_prefix: http
            rds: {route_config_name: routes, config_source: {ads: {}, resource_api_version: V3}}
            http_filters:
            - name: envoy.filters.http.router
              typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
	routesConfig = `apiVersion: example.com/v1
kind: EnvoyConfig
metadata:
  name: routes
spec:
  envoyRef: edge
  resources:
    routes:
    - name: routes
      virtual_hosts:
      - name: all
        domains: ['*']
        routes:
        - match: {prefix: /}
          route: {cluster: backend}
`
	clusterConfig = `apiVersion: example.com/v1
kind: EnvoyConfig
metadata:
  name: cluster
spec:
  envoyRef: edge
  resources:
    clusters:
    - {name: backend, type: EDS, connect_timeout: 1s, eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}}
`
	service = `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
`
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // problems, with the directory's path cut
		// configs, fleets, skipped
		counts [3]int
	}{
		{"a fleet split over files, references whole across them", map[string]string{
			"a.yaml": listenerConfig, "b.yaml": routesConfig + "---\n" + service + "---\n" + clusterConfig,
		}, nil, [3]int{3, 1, 1}},
		{"a reference that leads nowhere", map[string]string{
			"a.yaml": listenerConfig + "---\n" + routesConfig,
		}, []string{`a.yaml (document 2): EnvoyConfig team/routes: spec.resources.routes[0] ("routes"): cluster "backend" does not exist`}, [3]int{2, 1, 0}},
		{"another fleet's cluster does not count", map[string]string{
			"a.yaml": routesConfig, "b.yaml": strings.Replace(clusterConfig, "envoyRef: edge", "envoyRef: other", 1),
		}, []string{`a.yaml (document 1): EnvoyConfig team/routes: spec.resources.routes[0] ("routes"): cluster "backend" does not exist`}, [3]int{2, 2, 0}},
		{"an unknown field of the EnvoyConfig", map[string]string{
			"a.yaml": strings.Replace(clusterConfig, "envoyRef: edge", "envoyRef: edge\n  envoyRefs: edge", 1),
		}, []string{`a.yaml (document 1): EnvoyConfig cluster: error unmarshaling JSON: while decoding JSON: json: unknown field "envoyRefs"`}, [3]int{0, 0, 0}},
		{"an unknown Envoy field", map[string]string{
			"a.yaml": strings.Replace(clusterConfig, "connect_timeout: 1s", "connect_timeout: 1s, connect_timeuot: 2s", 1),
		}, []string{`a.yaml (document 1): EnvoyConfig team/cluster: spec.resources.clusters[0]: proto: (line 1:25): unknown field "connect_timeuot"`}, [3]int{1, 1, 0}},
		{"Envoy's validation rules", map[string]string{
			"a.yaml": strings.Replace(clusterConfig, "connect_timeout: 1s", "connect_timeout: -1s", 1),
		}, []string{`a.yaml (document 1): EnvoyConfig team/cluster: spec.resources.clusters[0] ("backend"): invalid Cluster.ConnectTimeout: value must be greater than 0s`}, [3]int{1, 1, 0}},
		{"a private key inline", map[string]string{
			"a.yaml": `apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: keys, namespace: other}
spec:
  envoyRef: edge
  resources:
    secrets:
    - {name: s, tls_certificate: {private_key: {inline_string: k}}}
`}, []string{`a.yaml (document 1): EnvoyConfig other/keys: spec.resources.secrets[0] ("s"): tls_certificate.private_key.inline_string holds secret material inline`}, [3]int{1, 1, 0}},
		{"the same EnvoyConfig twice", map[string]string{
			"a.yaml": clusterConfig, "b.yaml": clusterConfig,
		}, []string{`b.yaml (document 1): EnvoyConfig team/cluster: defined again (first in a.yaml (document 1))`}, [3]int{1, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			docs, err := readManifests([]string{dir}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			v := validate(docs, "team", translate.Policy{Namespace: "kube-envoy-controller"})
			var got []string
			for _, p := range v.problems {
				p = strings.ReplaceAll(p, dir+string(filepath.Separator), "")
				// Messages are long: the test holds their beginning.
				for _, w := range tt.want {
					if strings.HasPrefix(p, w) {
						p = w
					}
				}
				got = append(got, p)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if c := [3]int{v.configs, v.fleets, v.skipped}; c != tt.counts {
				t.Errorf("configs, fleets, skipped = %v, want %v", c, tt.counts)
			}
		})
	}
}

// A directory is read in name order, only its YAML and JSON files, and its
// subdirectories only with -R.
func TestReadManifests(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"b.yaml": "a: 1\n---\nb: 2\n", "a.json": `{"c": 3}`, "notes.txt": "x", "sub/d.yml": "d: 4\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, recursive := range []bool{false, true} {
		docs, err := readManifests([]string{dir}, recursive, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range docs {
			rel, _ := filepath.Rel(dir, d.file)
			got = append(got, rel+"#"+strings.TrimSpace(string(d.data)))
		}
		want := []string{`a.json#{"c": 3}`, "b.yaml#a: 1", "b.yaml#b: 2"}
		if recursive {
			want = append(want, "sub/d.yml#d: 4")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("recursive %v: %q, want %q", recursive, got, want)
		}
	}
}

// - reads stdin, as kubectl apply -f - does.
func TestReadManifestsFromStdin(t *testing.T) {
	docs, err := readManifests([]string{"-"}, false, strings.NewReader(listenerConfig+"---\n"+routesConfig))
	if err != nil {
		t.Fatal(err)
	}
	v := validate(docs, "team", translate.Policy{Namespace: "kube-envoy-controller"})
	want := []string{`<stdin> (document 2): EnvoyConfig team/routes: spec.resources.routes[0] ("routes"): cluster "backend" does not exist`}
	if !reflect.DeepEqual(v.problems, want) {
		t.Errorf("problems %q, want %q", v.problems, want)
	}
}

// validate applies the operator's content policy: the operator's namespace
// from --operator-namespace, and what --allowed-files and --allowed-env
// allow, as the operator's flags of those names do.
func TestValidateContentPolicy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "steal.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: steal, namespace: team}
spec:
  envoyRef: edge
  resources:
    routes:
    - name: r
      virtual_hosts:
      - name: all
        domains: ["*"]
        routes:
        - match: {prefix: /}
          direct_response: {status: 200, body: {filename: /etc/pages/index.html}}
        - match: {prefix: /env}
          direct_response: {status: 200, body: {environment_variable: GREETING}}
    clusters:
    - name: xds
      type: STRICT_DNS
      connect_timeout: 1s
      dns_refresh_rate: 0.1s
      load_assignment:
        cluster_name: xds
        endpoints:
        - lb_endpoints:
          - endpoint: {address: {socket_address: {address: kec-xds.kec-system.svc.cluster.local, port_value: 18000}}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
		cmd.SetArgs(append([]string{"validate", "-f", file}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("--operator-namespace", "kec-system")
	for _, want := range []string{
		`virtual_hosts[0].routes[0].direct_response.body.filename names the file "/etc/pages/index.html"`,
		`virtual_hosts[0].routes[1].direct_response.body.environment_variable names the environment variable "GREETING"`,
		`load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address "kec-xds.kec-system.svc.cluster.local" is the operator's`,
		`dns_refresh_rate is 100ms, below its floor 1s`,
	} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("with the default policy: error %v, output\n%s\nwant %q", err, out, want)
		}
	}
	out, err = run("--operator-namespace", "kec-system", "--allowed-files", "/etc/pages/", "--allowed-env", "GREETING")
	if err == nil || strings.Contains(out, "/etc/pages") || strings.Contains(out, "GREETING") || !strings.Contains(out, "is the operator's") {
		t.Errorf("with the file and the variable allowed: error %v, output\n%s", err, out)
	}
	if _, err := run("--bounds", "envoy.config.cluster.v3.Cluster.dns_refresh_rate=1ms"); err == nil || !strings.Contains(err.Error(), "is not <field>=<min>:<max>") {
		t.Errorf("bounds that do not read: %v", err)
	}
	bounds := "--bounds=envoy.config.cluster.v3.Cluster.dns_refresh_rate=100ms:"
	if out, err = run("--allowed-files", "/etc/pages/", "--allowed-env", "GREETING", bounds); err != nil {
		t.Errorf("with the operator in its default namespace: %v\n%s", err, out)
	}
	if _, err := run("--allowed-files", "/etc/envoy/xds-tls/"); err == nil || !strings.Contains(err.Error(), "the fleet's xDS client certificate") {
		t.Errorf("allowing the xDS certificate: %v", err)
	}
}

// With --envoy, a real Envoy loads what each fleet would be served: the
// samples' gateway and sidecar fleets load, and the proxyless gRPC fleet's
// api_listener, which admission admits for gRPC clients, is what Envoy
// refuses, in Envoy's words.
func TestValidateWithEnvoy(t *testing.T) {
	envoy := realenvoy.Require(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	samples := filepath.Join(root, "config", "samples")
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
		cmd.SetArgs(append([]string{"validate"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("-f", filepath.Join(samples, "example_v1_envoyconfig_http.yaml"), "-f", filepath.Join(samples, "example_v1_envoyconfig_https.yaml"),
		"-f", filepath.Join(samples, "example_v1_envoyconfig_http_canary.yaml"), "-f", filepath.Join(samples, "example_v1_envoy_sidecar.yaml"), "--envoy="+envoy)
	if err != nil || !strings.Contains(out, "fleet default/web-gateway: Envoy 1.40.0 loads what it would be served") ||
		!strings.Contains(out, "fleet default/shop-mesh: Envoy 1.40.0 loads") {
		t.Errorf("the gateway and sidecar samples: %v\n%s", err, out)
	}
	t.Setenv("ENVOY", envoy)
	out, err = run("-f", filepath.Join(samples, "example_v1_envoyconfig_grpc.yaml"), "--envoy")
	if err == nil || !strings.Contains(out, "fleet default/greeter-mesh: Envoy 1.40.0 refuses what it would be served") ||
		!strings.Contains(out, "missing the API listener extension") {
		t.Errorf("the proxyless fleet, in Envoy: %v\n%s", err, out)
	}
	if out, err := run("-f", filepath.Join(samples, "example_v1_envoyconfig_grpc.yaml")); err != nil {
		t.Errorf("the proxyless fleet, without --envoy: %v\n%s", err, out)
	}
	if _, err := run("-f", samples, "--envoy="+filepath.Join(t.TempDir(), "no-envoy")); err == nil {
		t.Error("--envoy naming no binary: no error")
	}
}
