package debug

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// keyListener terminates TLS with a private key inline, as an EnvoyConfig
// created before admission refused secret material inline may; it is served
// all the same.
const keyListener = `{"name": "https", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8443}}, "filter_chains": [{
  "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    "common_tls_context": {"tls_certificates": [{"certificate_chain": {"inline_string": "PUBLIC-CHAIN"}, "private_key": {"inline_string": "PRIVATE-KEY"}}]}}},
  "filters": [{"name": "tcp", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "backend"}}]}]}`

const backendCluster = `{"name": "backend", "type": "STATIC", "connect_timeout": "1s"}`

// configWith is EnvoyConfig ns/name of fleet edge with these listeners and
// clusters.
func configWith(ns, name string, listeners, clusters []string) translate.Config {
	raw := func(docs []string) []runtime.RawExtension {
		var out []runtime.RawExtension
		for _, d := range docs {
			out = append(out, runtime.RawExtension{Raw: []byte(d)})
		}
		return out
	}
	return translate.Config{Name: ns + "/" + name, Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge",
		Resources: examplev1.EnvoyResources{Listeners: raw(listeners), Clusters: raw(clusters)}}}
}

// recorded is the history the leader records for configs, over prev.
func recorded(prev publish.History, configs ...translate.Config) publish.History {
	ir := translate.Translate(translate.Input{Configs: configs})
	return publish.Decide(prev, ir, publish.Acks{}, nil).History
}

// A recorded revision holds the inline keys of the EnvoyConfigs it serves
// (only spec.resources.secrets is left out of it). What the endpoint shows
// of a history is the served revision's content, its secret material
// redacted and everything else as recorded, and of the other revisions
// their versions and marks only.
func TestShown(t *testing.T) {
	tls := configWith("ns", "tls", []string{keyListener}, nil)
	backend := configWith("ns", "backend", nil, []string{backendCluster})
	old := recorded(publish.History{}, backend)
	old.Revisions[0].Acked = true
	h := recorded(old, backend, tls)
	h.Revisions = append(h.Revisions, publish.Revision{Version: "rejected", Rejected: "bad"})
	// A change of tls was withheld: the content it takes instead holds a key too.
	h.Withheld = map[string]translate.Withheld{"ns/tls": {Content: "c", Version: "rejected", Detail: "bad", Previous: &tls}}
	if encoded, _ := json.Marshal(h); !strings.Contains(string(encoded), "PRIVATE-KEY") {
		t.Fatalf("the recorded history holds no inline key, so this test proves nothing: %s", encoded)
	}

	shown, err := Shown(h)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(shown)
	if strings.Contains(string(js), "PRIVATE-KEY") || !strings.Contains(string(js), translate.Redacted) || !strings.Contains(string(js), "PUBLIC-CHAIN") {
		t.Errorf("secret material is shown, or public material is not: %s", js)
	}
	if w := shown.Withheld["ns/tls"]; len(shown.Withheld) != 1 || w.Version != "rejected" || w.Previous == nil || w.Previous.Name != "ns/tls" {
		t.Errorf("the withheld change is not shown: %+v", shown.Withheld)
	}
	if shown.Fleet != h.Fleet || shown.Current != h.Current || len(shown.Revisions) != len(h.Revisions) {
		t.Fatalf("shown %+v of %+v", shown, h)
	}
	for i, r := range shown.Revisions {
		want := h.Revisions[i]
		if r.Version != want.Version || r.Acked != want.Acked || r.Rejected != want.Rejected {
			t.Errorf("revision %d: %+v, want %+v", i, r, want)
		}
		if served := r.Version == h.Current; served != (len(r.Configs) > 0) {
			t.Errorf("revision %s (served: %v) shows %d EnvoyConfigs", r.Version, served, len(r.Configs))
		}
	}
	served := shown.Served().Configs
	if len(served) != 2 || served[0].Name != "ns/backend" || string(served[0].Spec.Resources.Clusters[0].Raw) != backendCluster {
		t.Errorf("content without secret material is not shown as recorded: %+v", served)
	}
	if !strings.Contains(string(h.Served().Configs[1].Spec.Resources.Listeners[0].Raw), "PRIVATE-KEY") {
		t.Error("the history given was changed")
	}
	// What is shown is what the proxies are served, redacted.
	got, err := Dump("", "", render(shown.Served().Configs), "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Dump("", "", render(h.Served().Configs), "")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("rendered, what is shown is\n%s\nand what is served\n%s", g, w)
	}
}

// A resource that does not decode cannot be told free of secrets: it is an
// error, not shown.
func TestRedactConfigRefusesWhatDoesNotDecode(t *testing.T) {
	if _, err := RedactConfig(configWith("ns", "bad", []string{`{"name": "l", "unknown_field": "PRIVATE-KEY"}`}, nil)); err == nil ||
		!strings.Contains(err.Error(), "spec.resources.listeners[0] does not decode") {
		t.Errorf("error %v", err)
	}
}

func render(configs []translate.Config) map[string][]types.Resource {
	resources, _ := translate.Render(translate.Policy{}, configs, configs, nil, nil)
	return resources
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
