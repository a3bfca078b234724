package main

import (
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// configsOf decodes EnvoyConfigs of namespace team, in order, each older
// than the next.
func configsOf(t *testing.T, content string) []translate.Config {
	t.Helper()
	docs, err := splitDocuments("test.yaml", []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	d := decodeConfigs(docs, "team")
	if len(d.problems) > 0 {
		t.Fatal(d.problems)
	}
	out := make([]translate.Config, len(d.configs))
	for i, fc := range d.configs {
		out[i] = fc.config
		out[i].Created = time.Unix(int64(i), 0)
	}
	return out
}

func worldOf(configs []translate.Config, h publish.History) world {
	w := world{configs: map[string]translate.Config{}, histories: map[fleet.ID]publish.History{{Namespace: "team", Name: "edge"}: h}}
	for _, c := range configs {
		w.configs[c.Name] = c
	}
	return w
}

// publishedHistory is the history of fleet team/edge once the operator
// published configs.
func publishedHistory(configs []translate.Config) publish.History {
	return worldOf(configs, publish.History{}).assumedHistory(fleet.ID{Namespace: "team", Name: "edge"})
}

func changesFrom(configs []translate.Config) []change {
	out := make([]change, len(configs))
	for i, c := range configs {
		out[i] = change{where: "file", config: c}
	}
	return out
}

// What the fleet is served now is its recorded revision, whatever its
// EnvoyConfigs say; what it would be served is what the publish stage
// would decide.
func TestPlanRecordedRevision(t *testing.T) {
	slow := configsOf(t, strings.Replace(clusterConfig, "connect_timeout: 1s", "connect_timeout: 2s", 1))
	fast := configsOf(t, clusterConfig)
	spare := configsOf(t, otherCluster)

	t.Run("EnvoyConfigs the operator has not published yet are part of the diff, and a note says so", func(t *testing.T) {
		w := worldOf(slow, publishedHistory(fast))
		r := plan(w, changesFrom(spare), time.Now())
		if len(r.Fleets) != 1 || len(r.Refused) != 0 {
			t.Fatalf("%+v", r)
		}
		f := r.Fleets[0]
		if len(f.Types) != 1 || len(f.Types[0].Changed) != 1 || len(f.Types[0].Added) != 1 ||
			f.Types[0].Changed[0].Fields[0].Path != "connect_timeout" || f.Types[0].Added[0].Name != "spare" {
			t.Errorf("types: %+v", f.Types)
		}
		if len(f.Notes) != 1 || !strings.HasPrefix(f.Notes[0], "the operator has not published the fleet's EnvoyConfigs as they are yet") {
			t.Errorf("notes: %q", f.Notes)
		}
	})

	t.Run("content every proxy rejected is not published again", func(t *testing.T) {
		rejected := publishedHistory(slow)
		h := publishedHistory(fast)
		h.Revisions[0].Acked = true
		r := rejected.Served()
		r.Rejected = "bad timeout"
		h.Revisions = append(h.Revisions, *r)
		w := worldOf(fast, h)
		got := plan(w, changesFrom(slow), time.Now())
		if len(got.Fleets) != 1 {
			t.Fatalf("%+v", got)
		}
		f := got.Fleets[0]
		if len(f.Types) != 0 || f.NewVersion != h.Current || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], "was rejected by every proxy (bad timeout)") {
			t.Errorf("%+v", f)
		}
		if got.changed() {
			t.Error("a change is reported")
		}
	})

	t.Run("an EnvoyConfig that leaves a fleet with a route to its cluster holds that fleet", func(t *testing.T) {
		// The cluster's EnvoyConfig moves to another fleet. Admission
		// judges the fleet it moves to, and lets it in; the fleet it
		// leaves would lose the cluster its route needs, and is held.
		live := configsOf(t, routesConfig+"---\n"+clusterConfig)
		w := worldOf(live, publishedHistory(live))
		moved := configsOf(t, strings.Replace(clusterConfig, "envoyRef: edge", "envoyRef: other", 1))
		got := plan(w, changesFrom(moved), time.Now())
		if len(got.Fleets) != 2 {
			t.Fatalf("%+v", got)
		}
		edge := got.Fleets[0]
		if edge.Fleet != "team/edge" || len(edge.Types) != 0 || edge.NewVersion != edge.Version || len(edge.Notes) != 1 ||
			!strings.HasPrefix(edge.Notes[0], `the fleet would be held on its published revision: EnvoyConfig team/routes: spec.resources.routes[0] ("routes"): cluster "backend" does not exist`) {
			t.Errorf("%+v", edge)
		}
	})

	t.Run("a version the EnvoyConfigs' status records as rejected is not published again, though the history does not say so", func(t *testing.T) {
		// The history was lost, and written again from what is served,
		// or cannot be read: what every proxy rejected is known from the
		// status of the EnvoyConfigs, whose content is unchanged since.
		rejected := publishedHistory(slow).Current
		w := worldOf(slow, publishedHistory(fast))
		c := w.configs["team/cluster"]
		w.status = map[string]recordedStatus{c.Name: {generation: 1, status: examplev1.EnvoyConfigStatus{
			ContentHash: publish.ContentHash(&examplev1.EnvoyConfig{Spec: c.Spec}), RejectedVersions: []string{rejected}}}}
		got := plan(w, changesFrom(slow), time.Now())
		if len(got.Fleets) != 1 {
			t.Fatalf("%+v", got)
		}
		f := got.Fleets[0]
		if len(f.Types) != 0 || f.NewVersion != f.Version || len(f.Notes) != 1 ||
			f.Notes[0] != "version "+rejected+" was rejected by every proxy ("+publish.KnownRejection+"); it is not published again until the content changes" {
			t.Errorf("%+v", f)
		}

		// Assumed, the fleet's history serves nothing rather than what
		// every proxy rejected.
		assumed := w.assumedHistory(fleet.ID{Namespace: "team", Name: "edge"})
		if r := assumed.Find(rejected); assumed.Current != "" || r == nil || r.Rejected == "" {
			t.Errorf("assumed: %+v", assumed)
		}
	})
}

// keyListenerConfig terminates TLS with a private key inline, as an
// EnvoyConfig stored before admission refused that may: it is served, and
// recorded, with its key.
const keyListenerConfig = `apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: tls}
spec:
  envoyRef: edge
  resources:
    listeners:
    - name: tls
      address: {socket_address: {address: 0.0.0.0, port_value: 8443}}
      filter_chains:
      - transport_socket:
          name: tls
          typed_config:
            '@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
            common_tls_context: {tls_certificates: [{certificate_chain: {inline_string: PUBLIC-CHAIN}, private_key: {inline_string: PRIVATE-KEY}}]}
        filters:
        - name: tcp
          typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: backend}
`

// The operator's debug endpoint shows a served revision with its secret
// material redacted: diff takes what the EnvoyConfigs hold for what was
// recorded when, redacted, they are the same, and says when that is not
// exact.
func TestUnredacted(t *testing.T) {
	live := configsOf(t, clusterConfig+"---\n"+keyListenerConfig)
	recorded := publishedHistory(live)
	shown, err := debug.Shown(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if translate.VersionOf(shown.Served().Configs) == recorded.Current {
		t.Fatal("the revision shown is not redacted, so this test proves nothing")
	}
	got, exact := unredacted(shown, live)
	if !exact || translate.VersionOf(got.Served().Configs) != recorded.Current {
		t.Errorf("restored: exact %v, version %s, want %s", exact, translate.VersionOf(got.Served().Configs), recorded.Current)
	}
	if diff := sameResources(t, render(got), render(recorded)); len(diff) > 0 {
		t.Errorf("restored, it renders otherwise: %v", diff)
	}

	rotated := configsOf(t, clusterConfig+"---\n"+strings.Replace(keyListenerConfig, "PRIVATE-KEY", "ANOTHER-KEY", 1))
	if _, exact := unredacted(shown, rotated); exact {
		t.Error("a key that changed since is taken for the one recorded")
	}
}

func render(h publish.History) map[string][]types.Resource {
	configs := h.Served().Configs
	resources, _ := translate.Render(translate.Policy{}, configs, configs, nil, nil)
	return resources
}
