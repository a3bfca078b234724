package translate

import (
	"slices"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Every default bound is a floor below its ceiling, of a field an
// EnvoyConfig reaches whose value has a size (a number, a duration, a
// bool), or of a fleet's resources of a kind. (That the fleet counts fit
// the server's default names per type, the operator's TestFlags proves:
// its defaults leave them as they are.)
func TestDefaultBounds(t *testing.T) {
	if _, err := reachableTypes(); err != nil {
		t.Fatal(err)
	}
	for name, b := range defaultBounds {
		if b.Min > b.Max {
			t.Errorf("%s: floor %d above ceiling %d", name, b.Min, b.Max)
		}
		if strings.HasPrefix(name, fleetPrefix) {
			if _, err := resource.KindNamed(strings.TrimPrefix(name, fleetPrefix)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		fd := boundedFields[protoreflect.FullName(name)]
		if fd == nil {
			t.Errorf("%s is no field an EnvoyConfig reaches", name)
			continue
		}
		if fd.IsList() || fd.IsMap() {
			t.Errorf("%s holds many values: bound each", name)
		}
		if md := fd.Message(); md != nil && md.FullName() != "google.protobuf.Duration" {
			if v := md.Fields().ByName("value"); !strings.HasPrefix(string(md.FullName()), "google.protobuf.") || v == nil || !isNumeric(v) && v.Kind() != protoreflect.BoolKind {
				t.Errorf("%s holds a %s, whose size this check cannot read", name, md.FullName())
			}
		} else if md == nil && !isNumeric(fd) && fd.Kind() != protoreflect.BoolKind {
			t.Errorf("%s holds a %s, which has no size", name, fd.Kind())
		}
	}
}

func TestParseBounds(t *testing.T) {
	for in, want := range map[string]Bounds{
		"": nil,
		"envoy.config.core.v3.HealthCheck.interval=500ms:": {"envoy.config.core.v3.HealthCheck.interval": {Min: int64(500 * time.Millisecond), Max: int64(time.Hour)}},
		"envoy.config.listener.v3.Listener.ignore_global_conn_limit=:true, fleet.routes=10:20": {
			"envoy.config.listener.v3.Listener.ignore_global_conn_limit": {Min: 0, Max: 1},
			"fleet.routes": {Min: 10, Max: 20},
		},
	} {
		got, err := ParseBounds(in)
		if err != nil {
			t.Errorf("ParseBounds(%q): %v", in, err)
			continue
		}
		if got.String() != want.String() {
			t.Errorf("ParseBounds(%q) = %s, want %s", in, got, want)
		}
		if again, err := ParseBounds(got.String()); err != nil || again.String() != got.String() {
			t.Errorf("ParseBounds(%q) = %s, %v: String does not read back", got.String(), again, err)
		}
	}
}

// A bounded field past its bounds is refused, naming the field, the value
// and the bound; within them, or within bounds the administrator widened,
// it passes.
func TestBoundsAreEnforced(t *testing.T) {
	hc := func(interval string) string {
		return staticCluster("k", "10.0.0.1", 80, `, "health_checks": [{"timeout": "1s", "interval": "`+interval+`", "unhealthy_threshold": 1, "healthy_threshold": 1, "tcp_health_check": {}}]`)
	}
	cb := func(n int) string {
		return staticCluster("k", "10.0.0.1", 80, `, "circuit_breakers": {"thresholds": [{"max_connections": `+strings.Repeat("9", n)+`}]}`)
	}
	conns := `{"name": "l", "ignore_global_conn_limit": true, "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}}, "filter_chains": [{"filters": [{"name": "tcp", "typed_config": {` +
		`"@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy", "stat_prefix": "t", "cluster": "k"}}]}]}`
	widened := Bounds{
		"envoy.config.core.v3.HealthCheck.interval":                  {Min: int64(100 * time.Millisecond), Max: int64(time.Hour)},
		"envoy.config.listener.v3.Listener.ignore_global_conn_limit": {Min: 0, Max: 1},
	}
	for _, tc := range []struct {
		name, kind, raw string
		bounds          Bounds
		want            [][2]string
	}{
		{"a health check every 100ms", "clusters", hc("0.100s"), nil,
			[][2]string{{"health_checks[0].interval", "is 100ms, below its floor 1s (--envoyconfig-bounds envoy.config.core.v3.HealthCheck.interval=<min>:<max> changes it)"}}},
		{"a health check every 100ms, allowed", "clusters", hc("0.100s"), widened, nil},
		{"a health check every day", "clusters", hc("86400s"), nil,
			[][2]string{{"health_checks[0].interval", "is 24h0m0s, above its ceiling 1h0m0s"}}},
		{"a health check every 10s", "clusters", hc("10s"), nil, nil},
		{"a million connections", "clusters", cb(7), nil,
			[][2]string{{"circuit_breakers.thresholds[0].max_connections", "is 9999999, above its ceiling 100000"}}},
		{"a thousand connections", "clusters", cb(3), nil, nil},
		{"a listener outside the global connection limit", "listeners", conns, nil,
			[][2]string{{"ignore_global_conn_limit", "is true, which only the cluster administrator may allow (--envoyconfig-bounds envoy.config.listener.v3.Listener.ignore_global_conn_limit=false:true)"}}},
		{"a listener outside the global connection limit, allowed", "listeners", conns, widened, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := resource.KindNamed(tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			m, name, err := resource.Decode(k, []byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			pol := testPolicy
			pol.Bounds = tc.bounds
			got := pol.refusals("team/c", []resource.Resource{{Kind: k, Name: name, Message: m, Path: "spec.resources." + tc.kind + "[0]", Source: "team/c"}})
			checkRefusals(t, got, tc.want)
		})
	}
}

// A change that would take a fleet past its count of a kind of resource is
// refused, naming the bound; one that does not add to a fleet already past
// a lowered bound is not.
func TestFleetCounts(t *testing.T) {
	pol := Policy{Bounds: Bounds{"fleet.clusters": {Max: 2}}}
	a, b, bigger := withClusters("a", 2), withClusters("b", 1), withClusters("a", 3)
	if got := Admit(pol, []Config{a}, "ns/b", &b); len(got) != 1 || !strings.Contains(got[0], "the fleet would hold 3 clusters (spec.resources.clusters), above its ceiling 2 (--envoyconfig-bounds fleet.clusters=<min>:<max> changes it)") {
		t.Errorf("a third cluster: %q", got)
	}
	if got := Admit(pol, nil, "ns/a", &a); len(got) != 0 {
		t.Errorf("two clusters: %q", got)
	}
	smaller := withClusters("a", 1)
	if got := Admit(pol, []Config{bigger}, "ns/a", &smaller); len(got) != 0 {
		t.Errorf("a fleet past its bound that shrinks: %q", got)
	}
	if got := Admit(pol, []Config{a, b}, "ns/a", &bigger); len(got) != 1 {
		t.Errorf("a fleet past its bound that grows: %q", got)
	}
}

// The server's limit of names per type lowers the default fleet counts, and
// refuses bounds above it.
func TestFitFleetCounts(t *testing.T) {
	got, err := Bounds(nil).FitFleetCounts(100)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resource.Kinds {
		if b, _ := got.bound(fleetPrefix + k.Field); b.Max != 99 {
			t.Errorf("%s: ceiling %d, want 99", k.Field, b.Max)
		}
	}
	if _, err := (Bounds{"fleet.routes": {Max: 100}}).FitFleetCounts(100); err == nil {
		t.Error("a fleet count at the server's limit passes")
	}
	if got, err := Bounds(nil).FitFleetCounts(10000); err != nil || got != nil {
		t.Errorf("the defaults do not fit 10000 names per type: %v, %v", got, err)
	}
}

// Translation keeps the counts too, for content that bypassed admission:
// a change that grows the fleet past a count is not served (its published
// content is), and says why; a fleet within its counts is served whole.
func TestFleetCountsInTranslation(t *testing.T) {
	pol := Policy{Bounds: Bounds{"fleet.clusters": {Max: 2}}}
	a, b, bigger := withClusters("a", 2), withClusters("b", 1), withClusters("a", 3)
	served := func(ir IR) int { return len(ir.Resources[resourcev3.ClusterType]) }
	for _, tt := range []struct {
		name             string
		current, publish []Config
		wantClusters     int
		wantChoice       map[string]Choice
	}{
		{"within its count", []Config{a}, nil, 2, map[string]Choice{a.Name: ChoiceCurrent}},
		{"a new EnvoyConfig past it", []Config{a, b}, []Config{a.Recorded()}, 2, map[string]Choice{a.Name: ChoiceCurrent, b.Name: ChoiceNone}},
		{"a change past it", []Config{bigger}, []Config{a.Recorded()}, 2, map[string]Choice{a.Name: ChoicePublished}},
		{"past it from the start", []Config{bigger}, nil, 0, map[string]Choice{a.Name: ChoiceNone}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ir := Translate(Input{Configs: tt.current, Published: tt.publish, Policy: pol})
			if got := served(ir); got != tt.wantClusters {
				t.Errorf("served %d clusters, want %d", got, tt.wantClusters)
			}
			for name, want := range tt.wantChoice {
				st := ir.Configs[name]
				if st.Choice != want {
					t.Errorf("%s: choice %s, want %s", name, st.Choice, want)
				}
				over := slices.ContainsFunc(st.Invalid, func(s string) bool {
					return strings.Contains(s, "the fleet would hold") && strings.Contains(s, "above its ceiling 2") && strings.Contains(s, "is not served")
				})
				if over != (want != ChoiceCurrent) {
					t.Errorf("%s: invalid %q", name, st.Invalid)
				}
			}
		})
	}
}

// withClusters is the EnvoyConfig ns/name with n clusters.
func withClusters(name string, n int) Config {
	var cs []runtime.RawExtension
	for i := range n {
		cs = append(cs, clusterNamed(name+strings.Repeat("x", i)))
	}
	return config(name, examplev1.EnvoyResources{Clusters: cs})
}
