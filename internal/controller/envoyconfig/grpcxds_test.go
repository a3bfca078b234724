package envoyconfig

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// grpcResources is the configuration of a proxyless gRPC service
// "greeter": an API listener, its route, an EDS cluster and its endpoints.
func grpcResources(port int, cluster string) examplev1.EnvoyResources {
	r := func(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }
	return examplev1.EnvoyResources{
		Listeners: []runtime.RawExtension{r(`{
  "name": "greeter",
  "api_listener": {"api_listener": {
    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    "stat_prefix": "greeter",
    "rds": {"route_config_name": "greeter-route", "config_source": {"ads": {}, "resource_api_version": "V3"}},
    "http_filters": [{"name": "envoy.filters.http.router",
      "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}}`)},
		Routes: []runtime.RawExtension{r(`{"name": "greeter-route", "virtual_hosts": [{"name": "greeter", "domains": ["*"],
  "routes": [{"match": {"prefix": ""}, "route": {"cluster": "` + cluster + `"}}]}]}`)},
		Clusters: []runtime.RawExtension{r(`{"name": "backend", "type": "EDS", "lb_policy": "ROUND_ROBIN", "connect_timeout": "1s",
  "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`)},
		Endpoints: []runtime.RawExtension{r(fmt.Sprintf(`{"cluster_name": "backend", "endpoints": [{"locality": {"zone": "z1"}, "load_balancing_weight": 1, "lb_endpoints": [
  {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": %d}}}}]}]}`, port))},
	}
}

// grpc-go's own xDS client, configured by an EnvoyConfig through the
// operator's xDS server, sends RPCs to the backend the EnvoyConfig names,
// follows a change without a restart, and is not affected by an invalid change.
func TestProxylessGRPCClient(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	portA, portB := xdstest.HealthBackend(t, "A"), xdstest.HealthBackend(t, "B")

	cfg := &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter", Namespace: ns},
		Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: grpcResources(portA, "backend")},
	}
	create(t, cfg)

	// The client holds the fleet's certificate, as its files, and verifies
	// the server against the fleet's CAs: mutual TLS, as for a proxy.
	a := testenv.Authority(t, ca)
	leaf, err := pki.IssueClient(a, fleet.ID{Namespace: ns, Name: "edge"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := xdstest.GRPCBootstrap(t, xdsClient(t), fleetID, "grpc-client-1", leaf.Cert, leaf.Key, a.Bundle())
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	served := func(name string) bool { return xdstest.Serves(conn, name, 2*time.Second) }

	testenv.Eventually(t, "RPCs to reach backend A", func() (bool, error) { return served("A"), nil })
	waitStatus(t, cfg, "the gRPC client to ACK", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Connected == 1 && c.Status.Proxies.Acked == 1
	})

	// Point the cluster at the second backend: the client follows, no restart.
	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources = grpcResources(portB, "backend")
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "RPCs to move to backend B", func() (bool, error) { return served("B") && !served("A"), nil })
	good := waitStatus(t, cfg, "the new version to be acked", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 1 })

	// An invalid change (the route names a cluster that does not exist) is refused...
	patch = client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources = grpcResources(portA, "nowhere")
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	bad := waitStatus(t, cfg, "the change to be refused", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionAccepted).Reason == examplev1.EnvoyConfigReasonReferencesMissing
	})
	if good.Status.PublishedVersion == "" || bad.Status.PublishedVersion != good.Status.PublishedVersion {
		t.Errorf("an invalid change was published: %s -> %s", good.Status.PublishedVersion, bad.Status.PublishedVersion)
	}
	// ...and the RPCs keep working, on backend B.
	for i := range 20 {
		if !served("B") {
			t.Fatalf("RPC %d after the invalid change failed", i)
		}
	}
}
