package gateway

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// backendRef is a reference to name, of namespace ns, group and kind when
// given (group "-" is none).
func backendRef(ns, group, kind, name string) gwv1.BackendObjectReference {
	r := gwv1.BackendObjectReference{Name: gwv1.ObjectName(name)}
	if ns != "" {
		r.Namespace = ptr(gwv1.Namespace(ns))
	}
	if group != "-" {
		r.Group = ptr(gwv1.Group(group))
	}
	if kind != "" {
		r.Kind = ptr(gwv1.Kind(kind))
	}
	return r
}

// The Services an Input's routes name: backends and mirrors of HTTPRoutes,
// backends of GRPCRoutes, in the route's namespace unless one is given,
// each once, Services of the core group only.
func TestBackendServices(t *testing.T) {
	http := func(ns string, rules ...gwv1.HTTPRouteRule) gwv1.HTTPRoute {
		return gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}, Spec: gwv1.HTTPRouteSpec{Rules: rules}}
	}
	backends := func(refs ...gwv1.BackendObjectReference) gwv1.HTTPRouteRule {
		var rule gwv1.HTTPRouteRule
		for _, r := range refs {
			rule.BackendRefs = append(rule.BackendRefs, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: r}})
		}
		return rule
	}
	mirror := func(r gwv1.BackendObjectReference) gwv1.HTTPRouteRule {
		return gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: r}}}}
	}
	grpc := func(ns string, r gwv1.BackendObjectReference) gwv1.GRPCRoute {
		return gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}, Spec: gwv1.GRPCRouteSpec{Rules: []gwv1.GRPCRouteRule{
			{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: r}}}}}}}
	}
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	tests := []struct {
		name string
		in   Input
		want []types.NamespacedName
	}{
		{"none", Input{}, nil},
		{"the route's namespace", Input{HTTPRoutes: []gwv1.HTTPRoute{http("a", backends(backendRef("", "-", "", "s")))}}, []types.NamespacedName{key("a", "s")}},
		{"another namespace, granted or not", Input{HTTPRoutes: []gwv1.HTTPRoute{http("a", backends(backendRef("b", "-", "", "s")))}}, []types.NamespacedName{key("b", "s")}},
		{"core group and Service kind said", Input{HTTPRoutes: []gwv1.HTTPRoute{http("a", backends(backendRef("", "", "Service", "s")))}}, []types.NamespacedName{key("a", "s")}},
		{"another kind or group left out", Input{HTTPRoutes: []gwv1.HTTPRoute{http("a", backends(backendRef("", "", "Pod", "p"), backendRef("", "example.com", "", "x")))}}, nil},
		{"a mirror", Input{HTTPRoutes: []gwv1.HTTPRoute{http("a", mirror(backendRef("", "-", "", "m")))}}, []types.NamespacedName{key("a", "m")}},
		{"once, in order", Input{
			HTTPRoutes: []gwv1.HTTPRoute{http("a", backends(backendRef("", "-", "", "s"), backendRef("", "-", "", "t")), backends(backendRef("a", "-", "", "s")))},
			GRPCRoutes: []gwv1.GRPCRoute{grpc("a", backendRef("", "-", "", "t")), grpc("c", backendRef("", "-", "", "t"))},
		}, []types.NamespacedName{key("a", "s"), key("a", "t"), key("c", "t")}},
	}
	for _, tt := range tests {
		if got := BackendServices(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: BackendServices = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The Secrets a Gateway's listeners name as certificates: in the Gateway's
// namespace unless one is given, each once, core Secrets only.
func TestCertificateSecrets(t *testing.T) {
	cert := func(ns, group, kind, name string) gwv1.SecretObjectReference {
		b := backendRef(ns, group, kind, name)
		return gwv1.SecretObjectReference{Group: b.Group, Kind: b.Kind, Name: b.Name, Namespace: b.Namespace}
	}
	gw := func(listeners ...[]gwv1.SecretObjectReference) gwv1.Gateway {
		g := gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "g"}}
		for _, refs := range listeners {
			l := gwv1.Listener{Name: "l", Protocol: gwv1.HTTPSProtocolType, Port: 443}
			if refs != nil {
				l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: refs}
			}
			g.Spec.Listeners = append(g.Spec.Listeners, l)
		}
		return g
	}
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	tests := []struct {
		name string
		gw   gwv1.Gateway
		want []types.NamespacedName
	}{
		{"no listener", gw(), nil},
		{"no TLS", gw(nil), nil},
		{"the Gateway's namespace", gw([]gwv1.SecretObjectReference{cert("", "-", "", "c")}), []types.NamespacedName{key("gw", "c")}},
		{"another namespace", gw([]gwv1.SecretObjectReference{cert("o", "", "Secret", "c")}), []types.NamespacedName{key("o", "c")}},
		{"another kind or group left out", gw([]gwv1.SecretObjectReference{cert("", "", "ConfigMap", "c"), cert("", "example.com", "", "x")}), nil},
		{"once, in order", gw([]gwv1.SecretObjectReference{cert("", "-", "", "b"), cert("", "-", "", "a")}, []gwv1.SecretObjectReference{cert("gw", "-", "", "b")}),
			[]types.NamespacedName{key("gw", "b"), key("gw", "a")}},
	}
	for _, tt := range tests {
		if got := CertificateSecrets(tt.gw); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: CertificateSecrets = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRefKey(t *testing.T) {
	tests := []struct {
		ref, ns string
		want    types.NamespacedName
	}{
		{"s", "gw", types.NamespacedName{Namespace: "gw", Name: "s"}},
		{"o/s", "gw", types.NamespacedName{Namespace: "o", Name: "s"}},
	}
	for _, tt := range tests {
		if got := RefKey(tt.ref, tt.ns); got != tt.want {
			t.Errorf("RefKey(%q, %q) = %v, want %v", tt.ref, tt.ns, got, tt.want)
		}
	}
}

// The Secrets a Config serves are copies of the Input's, by the Config's
// name for them, with the control plane's label; the Input's are not
// changed, and one the Input lacks is left out.
func TestServedSecrets(t *testing.T) {
	own := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "c", Labels: map[string]string{"a": "b"}}}
	other := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "o", Name: "d"}}
	in := Input{Gateway: gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "g"}},
		Secrets: map[types.NamespacedName]corev1.Secret{{Namespace: "gw", Name: "c"}: own, {Namespace: "o", Name: "d"}: other}}
	var cfg translate.Config
	for _, ref := range []string{"c", "o/d", "missing"} {
		cfg.Spec.TLSSecrets = append(cfg.Spec.TLSSecrets, examplev1.TLSSecret{Name: "sds-" + ref, SecretRef: ref})
	}
	got := ServedSecrets(in, cfg)
	if len(got) != 2 {
		t.Fatalf("ServedSecrets = %v, want c and o/d", got)
	}
	for ref, want := range map[string]map[string]string{
		"c":   {"a": "b", names.XDSSecretLabel: names.XDSSecretTLS},
		"o/d": {names.XDSSecretLabel: names.XDSSecretTLS},
	} {
		if !reflect.DeepEqual(got[ref].Labels, want) {
			t.Errorf("ServedSecrets[%q].Labels = %v, want %v", ref, got[ref].Labels, want)
		}
	}
	if len(own.Labels) != 1 || other.Labels != nil {
		t.Errorf("the Input's Secrets changed: %v, %v", own.Labels, other.Labels)
	}
}

// The Gateway's Config of a served revision is found by the Gateway's
// Config name, and only that.
func TestPublishedOf(t *testing.T) {
	gw := types.NamespacedName{Namespace: "ns", Name: "g"}
	served := []translate.Config{{Name: "ns/other"}, {Name: ConfigName("ns", "g"), Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "g"}}, {Name: ConfigName("other", "g")}}
	if got := PublishedOf(served, gw); got == nil || got.Name != ConfigName("ns", "g") || got.Spec.EnvoyRef != "g" {
		t.Errorf("PublishedOf = %+v, want the Gateway's Config", got)
	}
	if got := PublishedOf(served[:1], gw); got != nil {
		t.Errorf("PublishedOf of a revision without it = %+v, want nil", got)
	}
	if got := PublishedOf(nil, gw); got != nil {
		t.Errorf("PublishedOf(nil) = %+v, want nil", got)
	}
}

// A parentRef names a Gateway by its name and namespace, the route's when
// none is given, of the Gateway API's group and kind when they are given.
func TestParentIs(t *testing.T) {
	gw := types.NamespacedName{Namespace: "gw", Name: "edge"}
	tests := []struct {
		name string
		ref  gwv1.ParentReference
		ns   string
		want bool
	}{
		{"the route's namespace", gwv1.ParentReference{Name: "edge"}, "gw", true},
		{"another namespace than the route's", gwv1.ParentReference{Name: "edge"}, "team", false},
		{"the namespace given", gwv1.ParentReference{Name: "edge", Namespace: ptr(gwv1.Namespace("gw"))}, "team", true},
		{"an empty namespace is the route's", gwv1.ParentReference{Name: "edge", Namespace: ptr(gwv1.Namespace(""))}, "gw", true},
		{"another name", gwv1.ParentReference{Name: "other"}, "gw", false},
		{"group and kind given", gwv1.ParentReference{Name: "edge", Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: ptr(gwv1.Kind("Gateway"))}, "gw", true},
		{"another kind", gwv1.ParentReference{Name: "edge", Kind: ptr(gwv1.Kind("Service"))}, "gw", false},
		{"another group", gwv1.ParentReference{Name: "edge", Group: ptr(gwv1.Group("example.com"))}, "gw", false},
	}
	for _, tt := range tests {
		if got := ParentIs(tt.ref, tt.ns, gw); got != tt.want {
			t.Errorf("%s: ParentIs = %v, want %v", tt.name, got, tt.want)
		}
	}
}
