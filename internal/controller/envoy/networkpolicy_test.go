package envoy

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// A fleet of the built-in xDS server gets its egress NetworkPolicy, owned
// by its Envoy: a rule added by hand is taken out, a settled fleet costs no
// write, the allowlist's CIDRs narrow it, and opting out removes it. A fleet
// of another xDS server has none.
func TestNetworkPolicyFollowsSpec(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns}}
	if err := suite.Client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	np := testenv.WaitFor(t, suite.Client, ns, "guarded", &networkingv1.NetworkPolicy{}, nil)
	if !metav1.IsControlledBy(np, e) || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress ||
		np.Spec.PodSelector.MatchLabels["app.kubernetes.io/instance"] != "guarded" {
		t.Errorf("NetworkPolicy = %+v", np)
	}
	if b := np.Spec.Egress[0].To[0].IPBlock; b == nil || b.CIDR != "0.0.0.0/0" || !contains(b.Except, "169.254.0.0/16") || !contains(b.Except, "168.63.129.16/32") {
		t.Errorf("first rule = %+v, want 0.0.0.0/0 less the metadata ranges", np.Spec.Egress[0])
	}
	got := settled(t, e)
	suite.ExpectNoWrites(t, ControllerName, got, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})

	// A rule added by hand (every destination) is taken out.
	want := np.Spec.DeepCopy()
	np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{})
	if err := suite.Client.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "guarded", &networkingv1.NetworkPolicy{}, func(p *networkingv1.NetworkPolicy) bool {
		return len(p.Spec.Egress) == len(want.Egress)
	})

	// The allowlist's CIDRs narrow it.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Egress = &examplev1.EnvoyEgress{Allowed: &examplev1.EnvoyEgressAllowlist{CIDRs: []string{"10.0.0.0/8"}}}
	if err := suite.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "guarded", &networkingv1.NetworkPolicy{}, func(p *networkingv1.NetworkPolicy) bool {
		b := p.Spec.Egress[0].To[0].IPBlock
		return len(p.Spec.Egress[0].To) == 1 && b != nil && b.CIDR == "10.0.0.0/8"
	})
	got = settled(t, got)
	suite.ExpectNoWrites(t, ControllerName, got, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(e)})

	// Opting out removes it.
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Egress.NetworkPolicy = examplev1.EnvoyNetworkPolicyDisabled
	if err := suite.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, suite.Client, ns, "guarded", &networkingv1.NetworkPolicy{})

	// A fleet of another xDS server has none.
	other := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: ns},
		Spec: examplev1.EnvoySpec{XDS: &examplev1.XDS{Host: "xds.example", Port: 18000}}}
	if err := suite.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	settled(t, other)
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "elsewhere"}, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
		t.Errorf("a fleet of another xDS server: NetworkPolicy %v, want none", err)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// The allowlist is refused at admission when it cannot be meant, naming
// the field.
func TestEgressValidation(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	tests := []struct {
		name    string
		allowed examplev1.EnvoyEgressAllowlist
		field   string
	}{
		{"empty", examplev1.EnvoyEgressAllowlist{}, "needs at least one of cidrs and domains"},
		{"not-a-cidr", examplev1.EnvoyEgressAllowlist{CIDRs: []string{"10.0.0.1"}}, "spec.egress.allowed.cidrs[0]"},
		{"host-bits", examplev1.EnvoyEgressAllowlist{CIDRs: []string{"10.0.0.1/8"}}, "spec.egress.allowed.cidrs[0]"},
		{"upper-case-domain", examplev1.EnvoyEgressAllowlist{Domains: []string{"API.example.com"}}, "spec.egress.allowed.domains[0]"},
		{"partial-wildcard", examplev1.EnvoyEgressAllowlist{Domains: []string{"api*.example.com"}}, "spec.egress.allowed.domains[0]"},
		{"url", examplev1.EnvoyEgressAllowlist{Domains: []string{"https://example.com"}}, "spec.egress.allowed.domains[0]"},
	}
	for _, tt := range tests {
		e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: tt.name, Namespace: ns},
			Spec: examplev1.EnvoySpec{Egress: &examplev1.EnvoyEgress{Allowed: &tt.allowed}}}
		err := suite.Client.Create(ctx, e)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: got %v, want an Invalid error naming %s", tt.name, err, tt.field)
		}
	}
	bad := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "mode", Namespace: ns},
		Spec: examplev1.EnvoySpec{Egress: &examplev1.EnvoyEgress{NetworkPolicy: "Off"}}}
	if err := suite.Client.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.egress.networkPolicy") {
		t.Errorf("got %v, want an Invalid error naming spec.egress.networkPolicy", err)
	}
	good := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: ns},
		Spec: examplev1.EnvoySpec{Egress: &examplev1.EnvoyEgress{Allowed: &examplev1.EnvoyEgressAllowlist{
			CIDRs: []string{"10.0.0.0/8", "2001:db8::/32"}, Domains: []string{"api.example.com", "*.example.org"}}}}}
	if err := suite.Client.Create(ctx, good); err != nil {
		t.Errorf("a valid allowlist: %v", err)
	}
}
