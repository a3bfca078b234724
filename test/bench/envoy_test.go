//go:build bench

package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	envoyctrl "github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
)

// TestEnvoyFleets creates N Envoys (replicas 1) and, as the floor, the same
// ConfigMaps, Deployments and Services created directly, on a cluster with no
// client-side QPS limits. Both are timed to the same point, every Deployment
// with an available replica, four times in the order floor, operator,
// operator, floor (againstFloor). It reports those times, the time until the
// Envoys also report it in their status, the operator's write requests per
// Envoy and per minute once settled, and its memory. BENCH_ENVOY_SIZES sets N
// (default "100,1000"), BENCH_SETTLE the settled period (default 1m).
func TestEnvoyFleets(t *testing.T) {
	sizes := sizesEnv(t, "BENCH_ENVOY_SIZES", "100,1000")
	settle := envDuration(t, "BENCH_SETTLE", time.Minute)
	defaults := fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "xds.bench.svc", Port: 18000}}
	var rows []string
	for _, n := range sizes {
		heapBefore := operatorHeap(t)
		var heapWith measure.HeapStats
		runs := againstFloor(t, n, "bench-floor", "bench-envoy",
			func(ns string) time.Duration { return envoyFloor(t, n, ns, defaults) },
			func(ns string) fleetRun { return envoyFleets(t, n, ns) },
			func() { heapWith = operatorHeap(t) })
		floor1, floor2 := runs.floor[0], runs.floor[1]
		op1, op2 := runs.operator[0], runs.operator[1]
		t.Logf("N=%d Deployments available: floor %.1fs, operator %.1fs, operator %.1fs, floor %.1fs; Envoys Available %.1fs, %.1fs",
			n, floor1.Seconds(), op1.deployments.Seconds(), op2.deployments.Seconds(), floor2.Seconds(), op1.envoys.Seconds(), op2.envoys.Seconds())

		perMin := settledPerMinute(t, settle, func() int {
			return Total(operatorWritesIn(t, op1.ns)) + Total(operatorWritesIn(t, op2.ns))
		})
		rss := operatorRSS(t)
		writes := float64(Total(op1.writes)+Total(op2.writes)) / float64(2*n)
		rows = append(rows, fmt.Sprintf("| %d | %.1f / %.1f | %.1f / %.1f | %.2f | %.1f / %.1f | %.1f | %.1f | %.1f → %.1f | %d |",
			n, floor1.Seconds(), floor2.Seconds(), op1.deployments.Seconds(), op2.deployments.Seconds(),
			meanRatio(runs.floor, [2]time.Duration{op1.deployments, op2.deployments}),
			op1.envoys.Seconds(), op2.envoys.Seconds(), writes, perMin,
			mib(heapBefore.HeapAlloc), mib(heapWith.HeapAlloc), rss.Current>>20))
		t.Logf("N=%d: %s", n, rows[len(rows)-1])
		deleteNamespaces(t, runs.namespaces...)
	}
	rss := operatorRSS(t)
	Record(t, "envoy", strings.Join(append([]string{
		"Runs in the order floor, operator, operator, floor; each is timed from its first create to every Deployment with an available replica.",
		"",
		"| N | floor (s), 1st / 4th run | operator (s), 2nd / 3rd run | ratio of the means | Envoys report Available (s), 2nd / 3rd | writes per Envoy | writes/min settled (2N Envoys) | operator live heap after GC (MiB), before the row → with N Envoys | operator RSS at the end of the row (MiB) |",
		"|---|---|---|---|---|---|---|---|---|",
	}, rows...), "\n")+fmt.Sprintf("\n\nThe operator's peak RSS over the whole run (VmHWM, every row and benchmark before it): %d MiB.\n", rss.Peak>>20))
}

// operatorWritesIn counts the operator's write requests to ns from the audit log.
func operatorWritesIn(t *testing.T, ns string) map[string]int {
	return Writes(t, ns, OperatorUserAgent, "envoys", "configmaps", "deployments", "services", "events")
}

// fleetRun is one timed creation of n Envoys.
type fleetRun struct {
	ns          string
	deployments time.Duration  // until every Envoy's Deployment has an available replica: the floor's end point
	envoys      time.Duration  // until every Envoy reports it: availableReplicas 1 and Available
	writes      map[string]int // the operator's writes until then
}

// envoyFleets creates n Envoys in a new namespace ns and times them.
func envoyFleets(t *testing.T, n int, ns string) fleetRun {
	t.Helper()
	run := fleetRun{ns: ns}
	run.deployments, run.envoys = timeOperator(t, n, ns, "Envoys Available",
		func(ctx context.Context, i int) error {
			return k8s.Create(ctx, &examplev1.Envoy{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%04d", i), Namespace: ns},
				Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1),
					XDS: &examplev1.XDS{Host: "xds.bench.svc", Port: 18000}},
			})
		},
		&examplev1.EnvoyList{}, func(e *examplev1.Envoy) bool {
			return meta.IsStatusConditionTrue(e.Status.Conditions, examplev1.EnvoyConditionAvailable) && e.Status.AvailableReplicas == 1
		})
	run.writes = operatorWritesIn(t, ns)
	t.Logf("%s: Deployments available %.1fs, Envoys Available %.1fs, %d writes (%s)",
		ns, run.deployments.Seconds(), run.envoys.Seconds(), Total(run.writes), Breakdown(run.writes))
	return run
}

// envoyFloor creates in a new namespace ns, for n fleets, the ConfigMap,
// Deployment and Service the operator would, directly, and returns the time
// until every Deployment has an available replica: what the cluster itself
// needs for the same objects.
func envoyFloor(t *testing.T, n int, ns string, defaults fleet.Defaults) time.Duration {
	t.Helper()
	return timeFloor(t, n, ns, func(ctx context.Context, i int) error {
		e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%04d", i), Namespace: ns},
			Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1)}}
		want, err := envoyctrl.Desired(e, defaults)
		if err != nil {
			return err
		}
		for _, obj := range []client.Object{want.ConfigMap, want.Deployment, want.Service} {
			if err := k8s.Create(ctx, plain(obj)); err != nil {
				return err
			}
		}
		return nil
	})
}
