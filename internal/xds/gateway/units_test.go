package gateway

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

func hostname(h string) *gwv1.Hostname {
	if h == "" {
		return nil
	}
	n := gwv1.Hostname(h)
	return &n
}

// A listener's hostname and a route's intersect as the Gateway API says:
// either may be absent (any), and a wildcard matches the names below it,
// never its own suffix.
func TestIntersect(t *testing.T) {
	tests := []struct {
		listener string
		route    []gwv1.Hostname
		want     []string
	}{
		{"", nil, []string{"*"}},
		{"", []gwv1.Hostname{"a.example.com", "*.example.org"}, []string{"*.example.org", "a.example.com"}},
		{"a.example.com", nil, []string{"a.example.com"}},
		{"a.example.com", []gwv1.Hostname{"a.example.com"}, []string{"a.example.com"}},
		{"a.example.com", []gwv1.Hostname{"*.example.com"}, []string{"a.example.com"}},
		{"*.example.com", []gwv1.Hostname{"a.example.com", "a.b.example.com", "example.com"}, []string{"a.b.example.com", "a.example.com"}},
		{"*.example.com", []gwv1.Hostname{"*.b.example.com"}, []string{"*.b.example.com"}},
		{"*.b.example.com", []gwv1.Hostname{"*.example.com"}, []string{"*.b.example.com"}},
		{"*.example.com", []gwv1.Hostname{"*.example.com"}, []string{"*.example.com"}},
		{"a.example.com", []gwv1.Hostname{"b.example.com", "*.example.org"}, nil},
		{"*.example.com", []gwv1.Hostname{"example.com"}, nil},
	}
	for _, tc := range tests {
		if got := intersect(hostname(tc.listener), tc.route); !slices.Equal(got, tc.want) {
			t.Errorf("intersect(%q, %q) = %q, want %q", tc.listener, tc.route, got, tc.want)
		}
	}
}

// Envoy routes are ordered as the Gateway API orders matches.
func TestPrecedence(t *testing.T) {
	older, newer := metav1.Unix(1, 0), metav1.Unix(2, 0)
	ordered := []precedence{
		{pathRank: rankExact, pathLen: 2},
		{pathRank: rankRegex, pathLen: 9},
		{pathRank: rankPrefix, pathLen: 9},
		{pathRank: rankPrefix, pathLen: 4, method: true},
		{pathRank: rankPrefix, pathLen: 4, headers: 2},
		{pathRank: rankPrefix, pathLen: 4, headers: 1, queries: 3},
		{pathRank: rankPrefix, pathLen: 4, headers: 1, queries: 1},
		{pathRank: rankPrefix, pathLen: 4, created: older, route: "z/z"},
		{pathRank: rankPrefix, pathLen: 4, created: newer, route: "a/a"},
		{pathRank: rankPrefix, pathLen: 4, created: newer, route: "a/b"},
		{pathRank: rankPrefix, pathLen: 4, created: newer, route: "a/b", rule: 1},
		{pathRank: rankPrefix, pathLen: 4, created: newer, route: "a/b", rule: 1, match: 1},
	}
	for i := range ordered {
		for j := range ordered {
			if got := ordered[i].before(ordered[j]); got != (i < j) {
				t.Errorf("%+v before %+v = %v", ordered[i], ordered[j], got)
			}
		}
	}
}

// A reference across namespaces needs a ReferenceGrant of the referenced
// namespace, from the referrer's kind and namespace, to the kind and, if
// it names one, the object.
func TestPermitted(t *testing.T) {
	name := gwv1.ObjectName("web")
	grant := gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "backends"},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
			To:   []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service", Name: &name}},
		},
	}
	ref := reference{gwv1.GroupName, "HTTPRoute", "apps", "", "Service", "backends", "web"}
	tests := []struct {
		name string
		edit func(*reference)
		want bool
	}{
		{"granted", func(*reference) {}, true},
		{"same namespace", func(r *reference) { r.toNamespace = "apps"; r.toName = "other" }, true},
		{"another name", func(r *reference) { r.toName = "db" }, false},
		{"another kind", func(r *reference) { r.fromKind = "GRPCRoute" }, false},
		{"another namespace's route", func(r *reference) { r.fromNamespace = "other" }, false},
		{"a grant of another namespace", func(r *reference) { r.toNamespace = "elsewhere" }, false},
	}
	for _, tc := range tests {
		r := ref
		tc.edit(&r)
		if got := permitted([]gwv1beta1.ReferenceGrant{grant}, r); got != tc.want {
			t.Errorf("%s: permitted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestContainerPort(t *testing.T) {
	for port, want := range map[int32]int32{80: 10080, 443: 10443, 1023: 11023, 1024: 1024, 8080: 8080} {
		if got := ContainerPort(port); got != want {
			t.Errorf("ContainerPort(%d) = %d, want %d", port, got, want)
		}
	}
}

// Input that the API server's validation would refuse, or that it leaves
// half written, is translated without a panic.
func TestOddInput(t *testing.T) {
	empty := gwv1.Hostname("")
	inputs := map[string]Input{
		"nothing": {},
		"odd": {
			Gateway: gwv1.Gateway{Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{
				{Name: "a", Port: 80, Protocol: gwv1.HTTPSProtocolType, Hostname: &empty},
				{Name: "b", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromSelector)}}},
				{Name: "c", Port: 81, Protocol: gwv1.HTTPSProtocolType, TLS: &gwv1.ListenerTLSConfig{Mode: ptr(gwv1.TLSModePassthrough)}},
			}}},
			HTTPRoutes: []gwv1.HTTPRoute{{Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{}}},
				Rules: []gwv1.HTTPRouteRule{{
					Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{}}},
					Filters:     []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect}, {Type: gwv1.HTTPRouteFilterURLRewrite}, {Type: gwv1.HTTPRouteFilterRequestMirror}, {Type: "Unknown"}},
					BackendRefs: []gwv1.HTTPBackendRef{{}},
					Timeouts:    &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("not a duration"))},
				}},
			}}},
			GRPCRoutes: []gwv1.GRPCRoute{{Spec: gwv1.GRPCRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{}}},
				Rules:           []gwv1.GRPCRouteRule{{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{}}}}},
			}}},
		},
	}
	for name, in := range inputs {
		out := Translate(in)
		if len(out.Gateway.Conditions) == 0 {
			t.Errorf("%s: no Gateway condition", name)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// A route a real Envoy refused alone is served nothing and says so with
// Envoy's words; the Gateway's other routes are served as before. Alone
// keeps one route, with what it needs of the rest.
func TestRefusedRouteAloneIsNotServed(t *testing.T) {
	_, in := readCase(t, filepath.Join("testdata", "in", "http-routing.yaml"))
	keys := in.Routes()
	if len(keys) < 2 {
		t.Fatalf("routes = %v, want at least 2", keys)
	}
	refused, kept := keys[0], keys[1]
	before := Translate(in)
	in.Refused = map[RouteKey]Refusal{refused: {Reason: ReasonRefusedByEnvoy, Message: "Envoy 1.40.0 refuses to load it: bad"}}
	after := Translate(in)

	st := after.HTTPRoutes[refused.NamespacedName]
	if len(st) == 0 {
		t.Fatalf("no status for %v", refused)
	}
	for _, p := range st {
		a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
		if a == nil || a.Status != metav1.ConditionFalse || a.Reason != ReasonRefusedByEnvoy || !strings.Contains(a.Message, "refuses to load it: bad") {
			t.Errorf("the refused route's Accepted = %+v", a)
		}
	}
	if !reflect.DeepEqual(after.HTTPRoutes[kept.NamespacedName], before.HTTPRoutes[kept.NamespacedName]) {
		t.Errorf("the other route's status changed: %+v", after.HTTPRoutes[kept.NamespacedName])
	}
	routes := func(out Output) string {
		var b strings.Builder
		for _, r := range out.Config.Spec.Resources.Routes {
			b.Write(r.Raw)
		}
		return b.String()
	}
	if strings.Contains(routes(after), "HTTPRoute/"+refused.Namespace+"/"+refused.Name+"/") {
		t.Errorf("the refused route is still served")
	}
	if !strings.Contains(routes(after), "HTTPRoute/"+kept.Namespace+"/"+kept.Name+"/") {
		t.Errorf("the other route is not served any more")
	}

	alone := Translate(in.Alone(kept))
	if got := routes(alone); strings.Contains(got, "HTTPRoute/"+refused.Namespace+"/"+refused.Name+"/") || !strings.Contains(got, "HTTPRoute/"+kept.Namespace+"/"+kept.Name+"/") {
		t.Errorf("Alone(%v) serves %s", kept, got)
	}
}

// The GatewayClass's status lists the features sorted by name, as the
// Gateway API asks.
func TestSupportedFeaturesAreSorted(t *testing.T) {
	if !slices.IsSorted(SupportedFeatures) {
		t.Errorf("SupportedFeatures are not sorted: %v", SupportedFeatures)
	}
}
