package envoyconfig

import (
	"context"
	"strconv"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// A Service's endpoints are judged as the endpoints an EnvoyConfig writes:
// a hand-written EndpointSlice that points at a cloud metadata service is
// left out of the served load assignment, and the EnvoyConfig's status
// says which and why. The fleet's allowlist narrows them too. The API
// server itself refuses a link-local address in an EndpointSlice.
func TestServiceEndpointsArePoliced(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "eds", cluster("backend", "1s"))
	cfg.Spec.ServiceEndpoints = []examplev1.ServiceEndpoints{{Cluster: "backend", Service: "web", Port: intstr.FromString("http")}}
	create(t, cfg)

	sliceOf := func(name string, addrs ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		return s
	}
	if err := suite.Client.Create(ctx, sliceOf("web-linklocal", "169.254.169.254")); !apierrors.IsInvalid(err) {
		t.Errorf("an EndpointSlice at 169.254.169.254: %v, want the API server to refuse it", err)
	}
	create(t, sliceOf("web-abc", "10.0.0.1", "100.100.100.200", "168.63.129.16"))

	endpoints := func() string {
		var out []string
		for _, r := range xdsServer.Resources(fleetID)[resourcev3.EndpointType] {
			for _, loc := range r.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
				for _, e := range loc.GetLbEndpoints() {
					sa := e.GetEndpoint().GetAddress().GetSocketAddress()
					out = append(out, sa.GetAddress()+":"+strconv.FormatUint(uint64(sa.GetPortValue()), 10))
				}
			}
		}
		return strings.Join(out, ",")
	}
	testenv.Eventually(t, "the pod's endpoint alone", func() (bool, error) { return endpoints() == "10.0.0.1:8080", nil })
	st := waitStatus(t, cfg, "the left-out endpoints in the status", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Status == metav1.ConditionTrue
	})
	msg := condition(st, examplev1.EnvoyConfigConditionDegraded).Message
	for _, want := range []string{`Service "web"'s endpoint 100.100.100.200:8080`, "Alibaba Cloud", `Service "web"'s endpoint 168.63.129.16:8080`, "Azure's WireServer", `left out of cluster "backend"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("Degraded's message = %s\nwant it to say %q", msg, want)
		}
	}
	if endpoints() != "10.0.0.1:8080" {
		t.Errorf("served endpoints = %s", endpoints())
	}

	// The fleet's allowlist leaves out the pod's endpoint too.
	e := &examplev1.Envoy{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge"}, e); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(e.DeepCopy())
	e.Spec.Egress = &examplev1.EnvoyEgress{Allowed: &examplev1.EnvoyEgressAllowlist{CIDRs: []string{"192.168.0.0/16"}}}
	if err := suite.Client.Patch(ctx, e, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "no endpoint outside the allowlist", func() (bool, error) { return endpoints() == "", nil })
	waitStatus(t, cfg, "the allowlist in the status", func(c *examplev1.EnvoyConfig) bool {
		return strings.Contains(condition(c, examplev1.EnvoyConfigConditionDegraded).Message, `10.0.0.1:8080: "10.0.0.1" is outside the fleet's allowlist`)
	})
}
