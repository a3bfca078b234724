package envoyconfig

import (
	"context"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// A proxy whose NACK carries a 3 MiB error_detail leaves the EnvoyConfig's
// status writable: the detail reaches status cut to 1 KiB, and later
// changes are still reported.
func TestHugeNACKLeavesStatusWritable(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "huge-nack", cluster("backend", "1s"))
	create(t, cfg)
	addr := xdsClient(t)
	rejecting := xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-1", resourcev3.ClusterType)
	accepting := xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-2", resourcev3.ClusterType)
	for _, p := range []*xdstest.Proxy{rejecting, accepting} {
		firstClusters(t, p)
	}
	waitStatus(t, cfg, "both proxies to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 2 })

	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster("extra", "2s"))
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	huge := "cluster extra: " + strings.Repeat("x", 3<<20)
	if _, names := clusterNames(t, rejecting, huge); len(names) != 2 {
		t.Fatalf("the rejecting proxy got clusters %v, want the new version's two", names)
	}
	if _, names := clusterNames(t, accepting, ""); len(names) != 2 {
		t.Fatalf("the accepting proxy got clusters %v, want the new version's two", names)
	}
	got := waitStatus(t, cfg, "the NACK in status", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Nacked == 1 && c.Status.Proxies.Acked == 1
	})
	if n := len(got.Status.Proxies.LastNACK); n > resource.MaxNACKDetail || !strings.HasPrefix(got.Status.Proxies.LastNACK, "cluster extra: xxx") {
		t.Errorf("status.proxies.lastNACK has %d bytes (%.30q), want at most %d", n, got.Status.Proxies.LastNACK, resource.MaxNACKDetail)
	}
	degraded := condition(got, examplev1.EnvoyConfigConditionDegraded)
	if degraded.Reason != examplev1.EnvoyConfigReasonNacked || len(degraded.Message) > 2*resource.MaxNACKDetail {
		t.Errorf("Degraded = %s with a message of %d bytes", degraded.Reason, len(degraded.Message))
	}

	// Status still follows the spec.
	patch = client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = cfg.Spec.Resources.Clusters[:1]
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*xdstest.Proxy{rejecting, accepting} {
		if _, names := clusterNames(t, p, ""); len(names) != 1 {
			t.Fatalf("a proxy got clusters %v after the change back, want one", names)
		}
	}
	waitStatus(t, cfg, "the change back to be reported", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Acked == 2 && condition(c, examplev1.EnvoyConfigConditionDegraded).Status == "False"
	})
}
