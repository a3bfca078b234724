package envoyconfig

import (
	"context"
	"fmt"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// pushStages is the histogram of a push's stages.
const pushStages = "kube_envoy_controller_xds_push_stage_seconds"

// allStages are the stages one EnvoyConfig edit of a fleet with connected
// proxies goes through, on the leader.
var allStages = []server.Stage{server.StageQueue, server.StageRead, server.StageTranslate, server.StageJudge, server.StageReports,
	server.StageRecord, server.StageServe, server.StageStatus, server.StageFanout}

// stageCounts returns the number of observations of each stage.
func stageCounts(t *testing.T) map[server.Stage]uint64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[server.Stage]uint64{}
	for _, f := range families {
		if f.GetName() != pushStages {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					out[server.Stage(l.GetValue())] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// One EnvoyConfig edit, once its proxies accepted it, has observed each
// stage of its push once; a settled reconcile of the fleet observes none.
func TestPushStagesObservedOncePerEdit(t *testing.T) {
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "stages", cluster("backend", "1s"))
	create(t, cfg)
	addr := xdsClient(t)
	proxies := []*xdstest.Proxy{
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-1", resourcev3.ClusterType),
		xdstest.Connect(t, dialFleet(t, addr, fleetID), fleetID, "pod-2", resourcev3.ClusterType),
	}
	var first string
	for _, p := range proxies {
		first, _ = firstClusters(t, p)
	}
	waitStatus(t, cfg, "both proxies to ACK", func(c *examplev1.EnvoyConfig) bool { return c.Status.Proxies.Acked == 2 })
	// No other fleet publishes meanwhile: its history's write would be heard.
	suite.Quiet(t)
	before := stageCounts(t)

	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources.Clusters = append(cfg.Spec.Resources.Clusters, cluster("extra", "2s"))
	if err := suite.Client.Patch(context.Background(), cfg, patch); err != nil {
		t.Fatal(err)
	}
	for _, p := range proxies {
		if v, names := clusterNames(t, p, ""); v == first || len(names) != 2 {
			t.Fatalf("got clusters %v at %s, want the new version's two", names, v)
		}
	}
	got := waitStatus(t, cfg, "both proxies to ACK the new version", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.Proxies.Acked == 2 && c.Status.PublishedVersion == xdsServer.Version(fleetID)
	})
	// The stages are observed once the reconcile that wrote the status
	// ends, and the fan-out once both proxies' ACKs came.
	moved := func() map[server.Stage]uint64 {
		now := stageCounts(t)
		out := map[server.Stage]uint64{}
		for _, s := range allStages {
			out[s] = now[s] - before[s]
		}
		return out
	}
	testenv.Eventually(t, "every stage of the edit's push to be observed", func() (bool, error) {
		m := moved()
		for _, s := range allStages {
			if m[s] == 0 {
				return false, fmt.Errorf("observed %v", m)
			}
		}
		return true, nil
	})
	suite.Touch(t, ControllerName, got)
	for s, n := range moved() {
		if n != 1 {
			t.Errorf("stage %s observed %d times for one edit, want once", s, n)
		}
	}

	// Settled: the same fleet reconciled again observes nothing.
	before = stageCounts(t)
	suite.ExpectNoWrites(t, ControllerName, cfg, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "edge"}})
	for s, n := range moved() {
		if n != 0 {
			t.Errorf("a settled reconcile observed stage %s %d times", s, n)
		}
	}
}
