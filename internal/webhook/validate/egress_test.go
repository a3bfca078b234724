package validate

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

func staticClusterAt(name, address string) string {
	return `{"name": "` + name + `", "type": "STATIC", "connect_timeout": "1s", "load_assignment": {"cluster_name": "` + name +
		`", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "` + address + `", "port_value": 443}}}}]}]}}`
}

// The fleet's Envoy narrows where its EnvoyConfigs' clusters may go: at
// kubectl apply, a destination outside its spec.egress.allowed is refused,
// naming the field, the destination and the allowlist; one inside is
// admitted; narrowing the allowlist applies to the next admission at once.
func TestEnvoyConfigOutsideTheAllowlist(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		Spec: examplev1.EnvoySpec{Egress: &examplev1.EnvoyEgress{Allowed: &examplev1.EnvoyEgressAllowlist{
			CIDRs: []string{"10.0.0.0/8"}, Domains: []string{"*.example.com"}}}}}
	if err := suite.Client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	out := envoyConfig(ns, "out", examplev1.EnvoyResources{Clusters: rawList(staticClusterAt("k", "192.168.1.1"))})
	err := suite.Client.Create(ctx, out)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a cluster outside the allowlist: %v, want a denial", err)
	}
	for _, want := range []string{`spec.resources.clusters[0] ("k"): load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address`,
		`"192.168.1.1" is outside the fleet's allowlist: its Envoy's spec.egress.allowed.cidrs (10.0.0.0/8)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("denial %q does not say %q", err, want)
		}
	}
	in := envoyConfig(ns, "in", examplev1.EnvoyResources{Clusters: rawList(staticClusterAt("k", "10.1.2.3"))})
	if err := suite.Client.Create(ctx, in); err != nil {
		t.Fatalf("a cluster inside the allowlist: %v", err)
	}

	// Narrowed: the next change of the same content is refused.
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.Egress.Allowed.CIDRs = []string{"172.16.0.0/12"}
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	cpatch := client.MergeFrom(in.DeepCopy())
	in.Labels = map[string]string{"touched": "yes"}
	in.Spec.Resources.Clusters = rawList(staticClusterAt("k", "10.1.2.4"))
	if err := suite.Client.Patch(ctx, in, cpatch); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.egress.allowed.cidrs (172.16.0.0/12)") {
		t.Errorf("after the allowlist narrowed: %v, want a denial naming it", err)
	}
}
