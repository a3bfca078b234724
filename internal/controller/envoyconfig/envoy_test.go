package envoyconfig

import (
	"context"
	"slices"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// weightedRoutes is a route configuration that sends / to the cluster app
// with weight.
func weightedRoutes(weight string) string {
	return `{"name": "local", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"},
		"route": {"weighted_clusters": {"clusters": [{"name": "app", "weight": ` + weight + `}]}}}]}]}`
}

const appCluster = `{"name": "app", "type": "STATIC", "connect_timeout": "1s", "load_assignment": {"cluster_name": "app", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}}}}]}]}}`

// Admission can be bypassed (the webhook is not in this suite): content
// stored past it is loaded in a real Envoy before the leader records a
// revision holding it. A change Envoy refuses, though the rules pass it,
// is not served: the fleet keeps the EnvoyConfig's published content, and
// its status and a Warning event give Envoy's words.
func TestEnvoyRefusedChangeIsNotServed(t *testing.T) {
	realenvoy.Require(t)
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "routes", raw(appCluster))
	cfg.Spec.Resources.Routes = append(cfg.Spec.Resources.Routes, raw(weightedRoutes("1")))
	create(t, cfg)
	got := waitStatus(t, cfg, "the EnvoyConfig to be served", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == "True"
	})
	if a := condition(got, examplev1.EnvoyConfigConditionAccepted); a.Message != "every resource is valid and its references exist" {
		t.Errorf("Accepted: %q; want it plain, since Envoy loaded it", a.Message)
	}
	version := got.Status.PublishedVersion

	// The weights now sum to zero, and a cluster comes with the change.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Resources.Routes[0] = raw(weightedRoutes("0"))
	got.Spec.Resources.Clusters = append(got.Spec.Resources.Clusters, cluster("added", "1s"))
	if err := suite.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	got = waitStatus(t, cfg, "the change to be refused by Envoy", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonRefusedByEnvoy
	})
	accepted, published, degraded := condition(got, examplev1.EnvoyConfigConditionAccepted), condition(got, examplev1.EnvoyConfigConditionPublished), condition(got, examplev1.EnvoyConfigConditionDegraded)
	const said = "refuses to load it: Sum of weights in the weighted_cluster must be greater than 0."
	if accepted.Status != "False" || !strings.Contains(accepted.Message, said) || !strings.Contains(accepted.Message, "the fleet keeps this EnvoyConfig's published content (version "+version+")") {
		t.Errorf("Accepted %s: %q; want False with Envoy's words and what the fleet keeps", accepted.Status, accepted.Message)
	}
	if published.Status != "False" || degraded.Status != "True" || degraded.Reason != examplev1.EnvoyConfigReasonRefusedByEnvoy {
		t.Errorf("Published %s, Degraded %s %s", published.Status, degraded.Status, degraded.Reason)
	}
	if got.Status.PublishedVersion != version {
		t.Errorf("published version %s, want %s kept", got.Status.PublishedVersion, version)
	}
	suite.WaitEvent(t, ns, "routes", "Warning "+examplev1.EnvoyConfigReasonRefusedByEnvoy+" ")
	if names := served(fleetID, resourcev3.ClusterType); slices.Contains(names, "added") || !slices.Contains(names, "app") {
		t.Errorf("the fleet is served clusters %v; want app, and nothing of the refused change", names)
	}

	// Fixed, it is served.
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Resources.Routes[0] = raw(weightedRoutes("2"))
	if err := suite.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cfg, "the fixed change to be served", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Status == "True" && condition(c, examplev1.EnvoyConfigConditionPublished).Status == "True"
	})
	testenv.Eventually(t, "the added cluster to be served", func() (bool, error) {
		return slices.Contains(served(fleetID, resourcev3.ClusterType), "added"), nil
	})
}
