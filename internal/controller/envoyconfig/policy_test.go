package envoyconfig

import (
	"context"
	"slices"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// Admission can be bypassed: the webhook may be down, or never installed
// (it is not, in this suite). Every route of theft that the content policy
// closes, created past admission beside a valid EnvoyConfig, is never
// served: a proxy of the fleet, over mutual TLS, gets the valid
// configuration and nothing of the refused one, and the refused
// EnvoyConfig's status and a Warning event say why, naming each field.
func TestRefusedContentIsNeverServed(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	create(t, newConfig(ns, "valid", cluster("backend", "1s")))
	exfiltrations := xdstest.Exfiltrations(operatorNamespace)
	for _, x := range exfiltrations {
		create(t, &examplev1.EnvoyConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: x.Name},
			Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: x.Resources},
		})
	}
	for _, x := range exfiltrations {
		got := waitStatus(t, &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: x.Name}}, x.Name+" refused",
			func(c *examplev1.EnvoyConfig) bool {
				return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonPolicyViolation
			})
		accepted, published, degraded := condition(got, examplev1.EnvoyConfigConditionAccepted), condition(got, examplev1.EnvoyConfigConditionPublished), condition(got, examplev1.EnvoyConfigConditionDegraded)
		for _, field := range x.Refused {
			if !strings.Contains(accepted.Message, field+" ") {
				t.Errorf("%s: Accepted's message %q does not name %s", x.Name, accepted.Message, field)
			}
		}
		if accepted.Status != "False" || published.Status != "False" || degraded.Status != "True" || degraded.Reason != examplev1.EnvoyConfigReasonPolicyViolation {
			t.Errorf("%s: Accepted %s, Published %s, Degraded %s %s", x.Name, accepted.Status, published.Status, degraded.Status, degraded.Reason)
		}
		suite.WaitEvent(t, ns, x.Name, "Warning "+examplev1.EnvoyConfigReasonPolicyViolation+" ")
	}

	// What the server holds for the fleet, and what a proxy gets.
	testenv.Eventually(t, "the valid cluster to be served", func() (bool, error) {
		return slices.Contains(served(fleetID, resourcev3.ClusterType), "backend"), nil
	})
	addr := xdsClient(t)
	clusters := xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	_, names := firstClusters(t, clusters)
	listeners := xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-2", resourcev3.ListenerType)
	_, listenerNames := clusterNames(t, listeners, "")
	for _, x := range exfiltrations {
		for _, c := range x.Clusters {
			if slices.Contains(names, c) || slices.Contains(served(fleetID, resourcev3.ClusterType), c) {
				t.Errorf("%s: cluster %q is served", x.Name, c)
			}
		}
		for _, l := range x.Listeners {
			if slices.Contains(listenerNames, l) || slices.Contains(served(fleetID, resourcev3.ListenerType), l) {
				t.Errorf("%s: listener %q is served", x.Name, l)
			}
		}
	}
	if !slices.Equal(names, []string{"backend"}) {
		t.Errorf("the proxy got clusters %v, want only backend", names)
	}

	// Fixed, it is served.
	fixed := &examplev1.EnvoyConfig{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "metadata-service"}, fixed); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(fixed.DeepCopy())
	fixed.Spec.Resources = examplev1.EnvoyResources{Clusters: []runtime.RawExtension{cluster("metadata", "1s")}}
	if err := suite.Client.Patch(ctx, fixed, patch); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, fixed, "the fixed EnvoyConfig to be served", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Status == "True" && condition(c, examplev1.EnvoyConfigConditionPublished).Status == "True"
	})
	if _, names := clusterNames(t, clusters, ""); !sameNames(names, "backend", "metadata") {
		t.Errorf("after the fix, the proxy got clusters %v", names)
	}
}
