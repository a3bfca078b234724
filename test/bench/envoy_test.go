//go:build bench

package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	envoyctrl "github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// TestEnvoyFleets creates N Envoys (replicas 1) and, as the floor, the same
// ConfigMaps, Deployments and Services created directly, on a cluster with no
// client-side QPS limits. Both are timed to the same point, every Deployment
// with an available replica, four times in the order floor, operator,
// operator, floor, so that a drift of the machine's load over the row weighs
// on both alike. It reports those times, the time until the Envoys also
// report it in their status, the operator's write requests per Envoy and per
// minute once settled, and its memory. BENCH_ENVOY_SIZES sets N (default
// "100,1000"), BENCH_SETTLE the settled period (default 1m).
func TestEnvoyFleets(t *testing.T) {
	sizes := sizesEnv(t, "BENCH_ENVOY_SIZES", "100,1000")
	settle := envDuration(t, "BENCH_SETTLE", time.Minute)
	defaults := fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "xds.bench.svc", Port: 18000}}
	var rows []string
	for _, n := range sizes {
		heapBefore := operatorHeap(t)
		floor1 := envoyFloor(t, n, fmt.Sprintf("bench-floor-%d-1", n), defaults)
		op1 := envoyFleets(t, n, fmt.Sprintf("bench-envoy-%d-1", n))
		heapWith := operatorHeap(t)
		op2 := envoyFleets(t, n, fmt.Sprintf("bench-envoy-%d-2", n))
		floor2 := envoyFloor(t, n, fmt.Sprintf("bench-floor-%d-2", n), defaults)
		t.Logf("N=%d Deployments available: floor %.1fs, operator %.1fs, operator %.1fs, floor %.1fs; Envoys Available %.1fs, %.1fs",
			n, floor1.Seconds(), op1.deployments.Seconds(), op2.deployments.Seconds(), floor2.Seconds(), op1.envoys.Seconds(), op2.envoys.Seconds())

		settledBefore := Total(operatorWritesIn(t, op1.ns)) + Total(operatorWritesIn(t, op2.ns))
		time.Sleep(settle)
		settledAfter := Total(operatorWritesIn(t, op1.ns)) + Total(operatorWritesIn(t, op2.ns))
		perMin := 0.0
		if settle > 0 {
			perMin = float64(settledAfter-settledBefore) / settle.Minutes()
		}
		rss := operatorRSS(t)
		floorMean := (floor1 + floor2).Seconds() / 2
		opMean := (op1.deployments + op2.deployments).Seconds() / 2
		writes := float64(Total(op1.writes)+Total(op2.writes)) / float64(2*n)
		rows = append(rows, fmt.Sprintf("| %d | %.1f / %.1f | %.1f / %.1f | %.2f | %.1f / %.1f | %.1f | %.1f | %.1f → %.1f | %d |",
			n, floor1.Seconds(), floor2.Seconds(), op1.deployments.Seconds(), op2.deployments.Seconds(), opMean/floorMean,
			op1.envoys.Seconds(), op2.envoys.Seconds(), writes, perMin,
			mib(heapBefore.HeapAlloc), mib(heapWith.HeapAlloc), rss.Current>>20))
		t.Logf("N=%d: %s", n, rows[len(rows)-1])
		deleteNamespaces(t, op1.ns, op2.ns, fmt.Sprintf("bench-floor-%d-1", n), fmt.Sprintf("bench-floor-%d-2", n))
	}
	rss := operatorRSS(t)
	Record(t, "envoy", strings.Join(append([]string{
		"Runs in the order floor, operator, operator, floor; each is timed from its first create to every Deployment with an available replica.",
		"",
		"| N | floor (s), 1st / 4th run | operator (s), 2nd / 3rd run | ratio of the means | Envoys report Available (s), 2nd / 3rd | writes per Envoy | writes/min settled (2N Envoys) | operator live heap after GC (MiB), before the row → with N Envoys | operator RSS at the end of the row (MiB) |",
		"|---|---|---|---|---|---|---|---|---|",
	}, rows...), "\n")+fmt.Sprintf("\n\nThe operator's peak RSS over the whole run (VmHWM, every row and benchmark before it): %d MiB.\n", rss.Peak>>20))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

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
	ctx := context.Background()
	namespace(t, ns)
	start := time.Now()
	parallel(t, n, func(i int) error {
		return k8s.Create(ctx, &examplev1.Envoy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%04d", i), Namespace: ns},
			Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1),
				XDS: &examplev1.XDS{Host: "xds.bench.svc", Port: 18000}},
		})
	})
	run := fleetRun{ns: ns}
	deployments, envoys := 0, 0
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		if run.deployments == 0 {
			var err error
			if deployments, err = availableDeployments(ctx, ns); err != nil {
				return false, nil
			}
			if deployments >= n {
				run.deployments = time.Since(start)
			}
		}
		var list examplev1.EnvoyList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		envoys = 0
		for _, e := range list.Items {
			if meta.IsStatusConditionTrue(e.Status.Conditions, conditions.Available) && e.Status.AvailableReplicas == 1 {
				envoys++
			}
		}
		if envoys >= n && run.envoys == 0 {
			run.envoys = time.Since(start)
		}
		return run.deployments > 0 && run.envoys > 0, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %d Envoys in %s: %d Deployments available, %d Envoys Available", n, ns, deployments, envoys)
	}
	run.writes = operatorWritesIn(t, ns)
	t.Logf("%s: Deployments available %.1fs, Envoys Available %.1fs, %d writes (%s)",
		ns, run.deployments.Seconds(), run.envoys.Seconds(), Total(run.writes), Breakdown(run.writes))
	return run
}

// availableDeployments counts the Deployments of ns with an available replica.
func availableDeployments(ctx context.Context, ns string) (int, error) {
	var list appsv1.DeploymentList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	ready := 0
	for _, d := range list.Items {
		if d.Status.AvailableReplicas == 1 {
			ready++
		}
	}
	return ready, nil
}

// envoyFloor creates in a new namespace ns, for n fleets, the ConfigMap,
// Deployment and Service the operator would, directly, and returns the time
// until every Deployment has an available replica: what the cluster itself
// needs for the same objects.
func envoyFloor(t *testing.T, n int, ns string, defaults fleet.Defaults) time.Duration {
	t.Helper()
	ctx := context.Background()
	namespace(t, ns)
	start := time.Now()
	parallel(t, n, func(i int) error {
		e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%04d", i), Namespace: ns},
			Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1)}}
		want, err := envoyctrl.Desired(e, defaults)
		if err != nil {
			return err
		}
		for _, obj := range []client.Object{want.ConfigMap, want.Deployment, want.Service} {
			// Plain objects: no owner, and not labelled as the operator's.
			obj.SetOwnerReferences(nil)
			labels := obj.GetLabels()
			delete(labels, objects.ManagedByLabel)
			obj.SetLabels(labels)
			if d, ok := obj.(*appsv1.Deployment); ok {
				delete(d.Spec.Template.Labels, objects.ManagedByLabel)
			}
			if err := k8s.Create(ctx, obj); err != nil {
				return err
			}
		}
		return nil
	})
	ready := 0
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		ready, err = availableDeployments(ctx, ns)
		return err == nil && ready >= n, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %d floor Deployments in %s: %d available", n, ns, ready)
	}
	d := time.Since(start)
	t.Logf("%s: Deployments available %.1fs", ns, d.Seconds())
	return d
}

// parallel runs create(i) for i in [0, n) on 32 workers.
func parallel(t *testing.T, n int, create func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := create(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}
