package gateway

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// badEdit is what an edit to route k that is then refused does to it: its
// generation moves on, its first rule sends elsewhere and matches another
// path, and it asks for another hostname.
func badEdit(t *testing.T, in *Input, k RouteKey) {
	t.Helper()
	elsewhere := gwv1.BackendObjectReference{Name: "elsewhere", Port: ptr[gwv1.PortNumber](80)}
	path := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/edited")}}
	for i := range in.HTTPRoutes {
		r := &in.HTTPRoutes[i]
		if k.Kind != "HTTPRoute" || r.Namespace != k.Namespace || r.Name != k.Name {
			continue
		}
		r = r.DeepCopy()
		r.Generation++
		r.Spec.Hostnames = append(r.Spec.Hostnames, "edited.example.com")
		if len(r.Spec.Rules) > 0 {
			r.Spec.Rules[0].Matches = []gwv1.HTTPRouteMatch{path}
			r.Spec.Rules[0].BackendRefs = []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: elsewhere}}}
		}
		in.HTTPRoutes[i] = *r
		return
	}
	for i := range in.GRPCRoutes {
		r := &in.GRPCRoutes[i]
		if k.Kind != "GRPCRoute" || r.Namespace != k.Namespace || r.Name != k.Name {
			continue
		}
		r = r.DeepCopy()
		r.Generation++
		r.Spec.Hostnames = append(r.Spec.Hostnames, "edited.example.com")
		if len(r.Spec.Rules) > 0 {
			r.Spec.Rules[0].BackendRefs = []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: elsewhere}}}
		}
		in.GRPCRoutes[i] = *r
		return
	}
	t.Fatalf("no route %v", k)
}

func generationOf(in Input, k RouteKey) int64 {
	for _, r := range in.HTTPRoutes {
		if k.Kind == "HTTPRoute" && r.Namespace == k.Namespace && r.Name == k.Name {
			return r.Generation
		}
	}
	for _, r := range in.GRPCRoutes {
		if k.Kind == "GRPCRoute" && r.Namespace == k.Namespace && r.Name == k.Name {
			return r.Generation
		}
	}
	return -1
}

func parentsOf(out Output, k RouteKey) []gwv1.RouteParentStatus {
	if k.Kind == "GRPCRoute" {
		return out.GRPCRoutes[k.NamespacedName]
	}
	return out.HTTPRoutes[k.NamespacedName]
}

// For every case and each of its routes that is served: an edit of the
// route that is refused alone changes nothing the fleet is served, when
// the published Config holds the route's earlier rules. The route's
// parents say why it is refused and which generation is served.
func TestRefusedRouteKeepsItsEarlierRules(t *testing.T) {
	cases, err := filepath.Glob("testdata/in/*.yaml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, path := range cases {
		_, in := readCase(t, path)
		published := Translate(in)
		for _, k := range in.Routes() {
			if !strings.Contains(routesOf(published), string(k.Kind)+"/"+k.Namespace+"/"+k.Name+"/") {
				continue // served nowhere: nothing to keep
			}
			t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml")+"/"+k.String(), func(t *testing.T) {
				edited := in
				edited.HTTPRoutes = append([]gwv1.HTTPRoute(nil), in.HTTPRoutes...)
				edited.GRPCRoutes = append([]gwv1.GRPCRoute(nil), in.GRPCRoutes...)
				gen := generationOf(in, k)
				badEdit(t, &edited, k)
				edited.Refused = map[RouteKey]Refusal{k: {Reason: ReasonRefusedByEnvoy, Message: "Envoy refuses to load it: bad"}}
				edited.Published = &published.Config
				out := Translate(edited)
				if a, b := toJSON(t, out.Config), toJSON(t, published.Config); a != b {
					t.Errorf("the refused edit changed what is served:\n%s\nwant\n%s", a, b)
				}
				before := parentsOf(published, k)
				for i, p := range parentsOf(out, k) {
					if i >= len(before) || !meta.IsStatusConditionTrue(before[i].Conditions, string(gwv1.RouteConditionAccepted)) {
						continue // not attached there: it says why
					}
					a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
					if a == nil || a.Status != metav1.ConditionFalse || a.Reason != ReasonRefusedByEnvoy || a.ObservedGeneration != gen+1 ||
						!strings.Contains(a.Message, "Envoy refuses to load it: bad") || !strings.Contains(a.Message, "rules of generation "+strconv.FormatInt(gen, 10)) {
						t.Errorf("Accepted = %+v; want False with Envoy's words and generation %d kept", a, gen)
					}
				}
			})
		}
	}
}

func routesOf(out Output) string {
	var b strings.Builder
	for _, r := range out.Config.Spec.Resources.Routes {
		b.Write(r.Raw)
	}
	return b.String()
}

// Earlier rules are kept only where they may still be served: a route
// never served is left out; so is one whose earlier rules send to another
// namespace's Service that its ReferenceGrant no longer allows; and the
// other routes' changes are served beside a route's earlier rules.
func TestEarlierRulesCases(t *testing.T) {
	_, in := readCase(t, filepath.Join("testdata", "in", "backends.yaml"))
	published := Translate(in)
	keys := in.Routes()

	t.Run("never served", func(t *testing.T) {
		for _, k := range keys {
			edited := in
			edited.Refused = map[RouteKey]Refusal{k: {Reason: ReasonRefusedByEnvoy, Message: "bad"}}
			edited.Published = &translate.Config{Name: published.Config.Name}
			out := Translate(edited)
			if strings.Contains(routesOf(out), string(k.Kind)+"/"+k.Namespace+"/"+k.Name+"/") {
				t.Errorf("%v is served, with no earlier rules", k)
			}
			for _, p := range parentsOf(out, k) {
				if a := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); strings.Contains(a.Message, "generation") {
					t.Errorf("%v: Accepted = %+v, which names no rules kept", k, a)
				}
			}
		}
	})

	t.Run("grant withdrawn", func(t *testing.T) {
		var across []RouteKey
		for _, k := range keys {
			if strings.Contains(routesOf(published), string(k.Kind)+"/"+k.Namespace+"/"+k.Name+"/") && sendsAcross(types.NamespacedName{Namespace: in.Gateway.Namespace, Name: in.Gateway.Name}, published, k) {
				across = append(across, k)
			}
		}
		if len(across) == 0 {
			t.Fatal("the case has no route served to another namespace's Service")
		}
		for _, k := range across {
			edited := in
			edited.Grants = []gwv1beta1.ReferenceGrant{}
			edited.Refused = map[RouteKey]Refusal{k: {Reason: ReasonRefusedByEnvoy, Message: "bad"}}
			edited.Published = &published.Config
			if out := Translate(edited); strings.Contains(routesOf(out), string(k.Kind)+"/"+k.Namespace+"/"+k.Name+"/") {
				t.Errorf("%v keeps rules to another namespace's Service without a ReferenceGrant", k)
			}
		}
	})

	t.Run("others change", func(t *testing.T) {
		_, in := readCase(t, filepath.Join("testdata", "in", "http-routing.yaml"))
		published := Translate(in)
		refused := RouteKey{Kind: "HTTPRoute", NamespacedName: types.NamespacedName{Namespace: "infra", Name: "matching"}}
		other := RouteKey{Kind: "HTTPRoute", NamespacedName: types.NamespacedName{Namespace: "infra", Name: "older"}}
		edited := in
		edited.HTTPRoutes = append([]gwv1.HTTPRoute(nil), in.HTTPRoutes...)
		badEdit(t, &edited, refused)
		badEdit(t, &edited, other) // a change that is served
		edited.Refused = map[RouteKey]Refusal{refused: {Reason: ReasonRefusedByEnvoy, Message: "bad"}}
		edited.Published = &published.Config
		out := Translate(edited)
		gw := types.NamespacedName{Namespace: in.Gateway.Namespace, Name: in.Gateway.Name}
		served := map[RouteKey][]string{}
		for _, rc := range routeConfigurations(&out.Config, gw) {
			for _, vh := range rc.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					k, gen, _ := routeKeyOf(r)
					served[k] = append(served[k], r.GetMatch().GetPathSeparatedPrefix()+" generation "+strconv.FormatInt(gen, 10))
				}
			}
		}
		if !slices.Contains(served[other], "/edited generation 2") {
			t.Errorf("the other route's change is not served: %v", served[other])
		}
		if len(served[refused]) == 0 || slices.ContainsFunc(served[refused], func(s string) bool { return !strings.HasSuffix(s, "generation 2") }) {
			t.Errorf("the refused route is served %v, want its rules of generation 2 alone", served[refused])
		}
	})
}

// sendsAcross reports whether the route k's rules in out, the
// translation of gw, send to a Service of another namespace than the
// route's.
func sendsAcross(gw types.NamespacedName, out Output, k RouteKey) bool {
	for _, rc := range routeConfigurations(&out.Config, gw) {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if rk, _, ok := routeKeyOf(r); !ok || rk != k {
					continue
				}
				for _, c := range clustersOf(r) {
					for _, se := range out.Config.Spec.ServiceEndpoints {
						if se.Cluster == c && refKeyIn(se.Service, gw.Namespace).Namespace != k.Namespace {
							return true
						}
					}
				}
			}
		}
	}
	return false
}
