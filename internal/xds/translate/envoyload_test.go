package translate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// What admission admits, a real Envoy loads: a property over EnvoyConfigs
// made by mutating the samples' fleet (and a few more resources of every
// kind): fields dropped, list items duplicated, values replaced by others
// that the same field has elsewhere (addresses, regexes, typed_configs,
// matchers, filter chains...), resources duplicated. For each, the change
// is judged as admission judges it: by Admit against the rest of the
// fleet, then by a real Envoy that loads the changed EnvoyConfig alone
// (envoyjudge.Judge). When both admit it, the fleet is translated and what
// it is served is loaded into Envoy, which must accept it: admission and
// Envoy never disagree.
//
// go test runs -envoy.cases cases from -envoy.seed, the same ones every
// time; a longer run finds more:
//
//	go test ./internal/xds/translate -run TestAdmittedLoadsInEnvoy -envoy.cases=5000 -envoy.seed=1000
//
// A case that fails prints its seed and the EnvoyConfig; each one found is
// kept as a case of the rules' tables.
var (
	envoyCases = flag.Int("envoy.cases", 60, "how many mutated EnvoyConfigs TestAdmittedLoadsInEnvoy loads into Envoy")
	envoySeed  = flag.Int64("envoy.seed", 1, "the seed of TestAdmittedLoadsInEnvoy's first case")
)

// moreResources is an EnvoyConfig of the samples' fleet with resources of
// every kind and of the rules' families that the samples lack: for
// mutations to take from.
const moreResources = `
listeners:
- name: tls-passthrough
  address: {socket_address: {address: "::", port_value: 9443, ipv4_compat: true}}
  enable_reuse_port: false
  listener_filters:
  - name: envoy.filters.listener.tls_inspector
    typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector}
  filter_chains:
  - filter_chain_match: {server_names: ["*.example.com", "a.example.org"], transport_protocol: tls}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
        common_tls_context:
          tls_certificate_sds_secret_configs: [{name: web-cert, sds_config: {ads: {}, resource_api_version: V3}}]
    filters:
    - name: envoy.filters.network.tcp_proxy
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tls, cluster: more-static}
  - filter_chain_match: {prefix_ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}], source_ports: [1, 2]}
    filters:
    - name: envoy.filters.network.tcp_proxy
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tcp, cluster: more-static}
- name: matched
  address: {socket_address: {address: 127.0.0.1, port_value: 9080}}
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: matched
        tracing:
          provider:
            name: envoy.tracers.zipkin
            typed_config: {"@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig, collector_cluster: more-static, collector_endpoint: /api/v2/spans, collector_endpoint_version: HTTP_JSON}
        route_config:
          name: inline
          virtual_hosts:
          - name: matched
            domains: ["*"]
            matcher:
              matcher_tree:
                input: {name: host, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x-tenant}}
                exact_match_map:
                  map:
                    a: {action: {name: route, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {prefix: /}, route: {cluster: more-static}}}}
              on_no_match:
                matcher:
                  matcher_list:
                    matchers:
                    - predicate: {single_predicate: {input: {name: h, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x-b}}, value_match: {safe_regex: {google_re2: {}, regex: "^b[0-9]+$"}}}}
                      on_match: {action: {name: route, typed_config: {"@type": type.googleapis.com/envoy.config.route.v3.Route, match: {prefix: /}, direct_response: {status: 404}}}}
        http_filters:
        - name: envoy.filters.http.rbac
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
            rules:
              policies:
                p:
                  permissions: [{not_rule: {header: {name: x-deny, string_match: {exact: "1"}}}}]
                  principals: [{any: true}]
        - name: envoy.filters.http.cors
          typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}
        - name: envoy.filters.http.router
          typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
routes:
- name: more
  virtual_hosts:
  - name: more
    domains: ["more.example.com", "*.more.example.com"]
    routes:
    - match: {safe_regex: {regex: "^/v[0-9]/items$"}, headers: [{name: x-v, string_match: {safe_regex: {regex: "a|b"}}}]}
      route:
        cluster: more-static
        timeout: 5s
        prefix_rewrite: /items
        retry_policy: {retry_on: 5xx, retry_back_off: {base_interval: 0.1s, max_interval: 1s}}
        upgrade_configs: [{upgrade_type: websocket}]
    - match: {prefix: /}
      direct_response: {status: 200, body: {inline_string: ok}}
clusters:
- name: more-static
  type: STATIC
  connect_timeout: 1s
  lb_policy: RING_HASH
  ring_hash_lb_config: {minimum_ring_size: 1024, maximum_ring_size: 2048}
  load_assignment:
    cluster_name: more-static
    endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.7, port_value: 8080}}}}]}]
  health_checks:
  - {name: tcp, timeout: 1s, interval: 5s, unhealthy_threshold: 2, healthy_threshold: 1, tcp_health_check: {}}
  transport_socket:
    name: envoy.transport_sockets.tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
      sni: backend.example.com
      common_tls_context:
        validation_context_sds_secret_config: {name: more-ca, sds_config: {ads: {}, resource_api_version: V3}}
  typed_extension_protocol_options:
    envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
      "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
      auto_config: {}
- name: more-eds
  type: EDS
  connect_timeout: 1s
  eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
  lb_policy: MAGLEV
  maglev_lb_config: {table_size: 65537}
endpoints:
- cluster_name: more-eds
  endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: "fd00::7", port_value: 80}}}}]}]
secrets:
- name: more-ca
  validation_context: {trusted_ca: {inline_string: "-----BEGIN CERTIFICATE-----"}}
`

// samplesFleet returns the EnvoyConfigs of the samples' fleet web-gateway,
// and moreResources as one more of it.
func samplesFleet(t testing.TB) []Config {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "example_v1_envoyconfig_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample EnvoyConfigs: %v", err)
	}
	var fleet []Config
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var c examplev1.EnvoyConfig
			if err := d.Decode(&c); err != nil {
				break
			}
			if c.Kind == "EnvoyConfig" && c.Spec.EnvoyRef == "web-gateway" {
				c.Namespace = "default"
				fleet = append(fleet, FromObject(&c))
			}
		}
	}
	var more examplev1.EnvoyResources
	if err := yaml.Unmarshal([]byte(moreResources), &more); err != nil {
		t.Fatal(err)
	}
	fleet = append(fleet, Config{Name: "default/more", Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "web-gateway", Resources: more}})
	for i := range fleet {
		fleet[i].Created = time.Unix(int64(i), 0)
	}
	return fleet
}

// trees returns a config's resources as JSON trees, by list.
func trees(t *testing.T, res examplev1.EnvoyResources) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	for _, k := range resource.Kinds {
		field := k.Field
		for _, raw := range *k.List(&res) {
			js, err := yaml.YAMLToJSON(raw.Raw)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(js, &v); err != nil {
				t.Fatal(err)
			}
			out[field] = append(out[field], v)
		}
	}
	return out
}

// pool holds every value each key has in the fleet's resources, at any
// depth: what a mutation puts in place of another.
type pool map[string][]any

func (p pool) add(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			p[k] = append(p[k], c)
			p.add(c)
		}
	case []any:
		for _, c := range v {
			p.add(c)
		}
	}
}

// slot is a field of a tree, key of m.
type slot struct {
	m   map[string]any
	key string
}

// slots returns every field of v, at any depth, in a stable order.
func slots(v any) []slot {
	var out []slot
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = append(out, slot{m: v, key: k})
				walk(v[k])
			}
		case []any:
			for i := range v {
				walk(v[i])
			}
		}
	}
	walk(v)
	return out
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var c any
	_ = json.Unmarshal(b, &c)
	return c
}

// mutate changes res, a config's resources as trees, from r: one to three
// of dropping a field, duplicating a list's item, and putting in a field a
// value the same key has somewhere in the fleet. It says what it did.
func mutate(r *rand.Rand, res map[string][]any, p pool) []string {
	var fields []string
	for _, k := range resource.Kinds {
		fields = append(fields, k.Field)
	}
	var did []string
	for range 1 + r.IntN(3) {
		switch op := r.IntN(10); {
		case op < 2: // duplicate a resource
			f := fields[r.IntN(len(fields))]
			if len(res[f]) == 0 {
				continue
			}
			res[f] = append(res[f], deepCopy(res[f][r.IntN(len(res[f]))]))
			did = append(did, "duplicate one of "+f)
		default:
			var all []any
			for _, f := range fields {
				all = append(all, res[f]...)
			}
			if len(all) == 0 {
				continue
			}
			target := all[r.IntN(len(all))]
			ss := slots(target)
			switch {
			case op < 4: // drop a field
				if len(ss) == 0 {
					continue
				}
				s := ss[r.IntN(len(ss))]
				delete(s.m, s.key)
				did = append(did, "drop "+s.key)
			case op < 5: // duplicate a list's item
				ls := slices.DeleteFunc(ss, func(s slot) bool {
					l, ok := s.m[s.key].([]any)
					return !ok || len(l) == 0
				})
				if len(ls) == 0 {
					continue
				}
				s := ls[r.IntN(len(ls))]
				l := s.m[s.key].([]any)
				s.m[s.key] = append(l, deepCopy(l[r.IntN(len(l))]))
				did = append(did, "duplicate an item of "+s.key)
			default: // a value the same key has elsewhere
				if len(ss) == 0 {
					continue
				}
				s := ss[r.IntN(len(ss))]
				vs := p[s.key]
				if len(vs) == 0 {
					continue
				}
				s.m[s.key] = deepCopy(vs[r.IntN(len(vs))])
				did = append(did, "replace "+s.key)
			}
		}
	}
	return did
}

func TestAdmittedLoadsInEnvoy(t *testing.T) {
	envoy := realenvoy.Require(t)
	fleet := samplesFleet(t)
	p := pool{}
	for _, c := range fleet {
		for _, vs := range trees(t, c.Spec.Resources) {
			for _, v := range vs {
				p.add(v)
			}
		}
	}
	// The fleet itself is admitted, and loads.
	if problems := Admit(Policy{}, fleet[:len(fleet)-1], fleet[len(fleet)-1].Name, &fleet[len(fleet)-1]); len(problems) > 0 {
		t.Fatalf("the fleet's own resources are refused: %v", problems)
	}
	if err := loadServed(t, envoy, fleet); err != nil {
		t.Fatalf("Envoy refuses the fleet's own resources: %s", realenvoy.Said(err))
	}
	judge := envoyjudge.New(context.Background(), envoyjudge.Options{Envoy: envoy, Concurrency: cap(envoys), Timeout: time.Minute})
	var admitted, loaded, byEnvoy atomic.Int64
	t.Cleanup(func() {
		t.Logf("%d cases from seed %d: %d admitted and loaded, %d refused by admission (%d of them by Envoy, past the rules)",
			*envoyCases, *envoySeed, loaded.Load(), int64(*envoyCases)-admitted.Load(), byEnvoy.Load())
	})
	for i := range *envoyCases {
		seed := *envoySeed + int64(i)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(seed), 0))
			which := r.IntN(len(fleet))
			res := trees(t, fleet[which].Spec.Resources)
			did := mutate(r, res, p)
			after := fleet[which]
			after.Spec.Resources = examplev1.EnvoyResources{}
			for _, k := range resource.Kinds {
				list := k.List(&after.Spec.Resources)
				for _, v := range res[k.Field] {
					js, err := json.Marshal(v)
					if err != nil {
						t.Fatal(err)
					}
					*list = append(*list, runtime.RawExtension{Raw: js})
				}
			}
			if problems := Admit(Policy{}, fleet, after.Name, &after); len(problems) > 0 {
				return
			}
			alone, err := envoyload.FromSpec(after.Spec.Resources)
			if err != nil {
				t.Fatal(err)
			}
			var clusters []string
			for _, c := range fleet {
				if c.Name != after.Name {
					clusters = append(clusters, envoyload.ClusterNames(c.Spec.Resources)...)
				}
			}
			switch v := judge.Judge(context.Background(), alone.WithClusters(clusters)); v.Outcome {
			case envoyjudge.Refused:
				// The rules admitted it; Envoy is the last word. Each such
				// case is one for the rules' tables, whose field paths are
				// more precise than Envoy's words.
				t.Logf("the rules admit it (%s), Envoy refuses it: %s", strings.Join(did, ", "), v.Message)
				byEnvoy.Add(1)
				return
			case envoyjudge.TimedOut, envoyjudge.Unjudged:
				t.Fatalf("Envoy did not judge it: %s", v.Message)
			}
			admitted.Add(1)
			configs := slices.Clone(fleet)
			configs[which] = after
			err = loadServed(t, envoy, configs)
			if err != nil {
				js, _ := json.Marshal(after.Spec.Resources)
				t.Fatalf("admitted (%s) but Envoy refuses it: %s\nEnvoyConfig %s:\n%s", strings.Join(did, ", "), realenvoy.Said(err), after.Name, js)
			}
			loaded.Add(1)
		})
	}
}

// envoys bounds how many Envoys the test runs at once.
var envoys = make(chan struct{}, 2)

// loadServed translates the fleet of configs and has Envoy load what it
// would be served.
func loadServed(t *testing.T, envoy string, configs []Config) error {
	t.Helper()
	ir := Translate(Input{Configs: configs})
	var r realenvoy.Resources
	for _, typeURL := range sortedKeys(ir.Resources) {
		for _, m := range ir.Resources[typeURL] {
			if err := r.AddMessage(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	envoys <- struct{}{}
	defer func() { <-envoys }()
	err := realenvoy.Load(envoy, t.TempDir(), r)
	if err != nil && !errors.Is(err, realenvoy.ErrRefused) {
		t.Fatal(err)
	}
	return err
}
