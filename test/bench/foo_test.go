//go:build bench

package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	fooctrl "github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/foo"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
)

// TestFooVsDeployments creates N Foos of the sample's shape (a deploymentName
// and replicas 1) and, as the floor, the same N Deployments created directly,
// on a cluster with no client-side QPS limits. Both are timed to the same
// point, every Deployment with its replica available, four times in the order
// floor, operator, operator, floor (againstFloor). It reports those times, the
// time until the Foos also show it in their status, the operator's write
// requests per Foo by resource (what a Foo costs the API server) and per
// minute once settled, and its memory. BENCH_FOO_SIZES sets N (default
// "100,1000"), BENCH_SETTLE the settled period (default 1m).
func TestFooVsDeployments(t *testing.T) {
	sizes := sizesEnv(t, "BENCH_FOO_SIZES", "100,1000")
	settle := envDuration(t, "BENCH_SETTLE", time.Minute)
	var rows, breakdowns []string
	for _, n := range sizes {
		heapBefore := operatorHeap(t)
		var heapWith measure.HeapStats
		runs := againstFloor(t, n, "bench-foo-floor", "bench-foo",
			func(ns string) time.Duration { return fooFloor(t, n, ns) },
			func(ns string) fooRun { return foos(t, n, ns) },
			func() { heapWith = operatorHeap(t) })
		floor1, floor2 := runs.floor[0], runs.floor[1]
		op1, op2 := runs.operator[0], runs.operator[1]
		t.Logf("N=%d Deployments available: floor %.1fs, operator %.1fs, operator %.1fs, floor %.1fs; Foos report it %.1fs, %.1fs",
			n, floor1.Seconds(), op1.deployments.Seconds(), op2.deployments.Seconds(), floor2.Seconds(), op1.foos.Seconds(), op2.foos.Seconds())

		perMin := settledPerMinute(t, settle, func() int {
			return Total(fooWritesIn(t, op1.ns)) + Total(fooWritesIn(t, op2.ns))
		})
		rss := operatorRSS(t)
		both := map[string]int{}
		for _, w := range []map[string]int{op1.writes, op2.writes} {
			for k, c := range w {
				both[k] += c
			}
		}
		perFoo := func(c int) float64 { return float64(c) / float64(2*n) }
		res := measure.ByResource(both)
		rows = append(rows, fmt.Sprintf("| %d | %.1f / %.1f | %.1f / %.1f | %.2f | %.1f / %.1f | %.2f | %.2f / %.2f / %.2f | %.1f | %.1f → %.1f | %d |",
			n, floor1.Seconds(), floor2.Seconds(), op1.deployments.Seconds(), op2.deployments.Seconds(),
			meanRatio(runs.floor, [2]time.Duration{op1.deployments, op2.deployments}),
			op1.foos.Seconds(), op2.foos.Seconds(), perFoo(Total(both)),
			perFoo(res["deployments"]), perFoo(res["foos/status"]), perFoo(res["events"]), perMin,
			mib(heapBefore.HeapAlloc), mib(heapWith.HeapAlloc), rss.Current>>20))
		breakdowns = append(breakdowns, fmt.Sprintf("- N=%d, both Foo runs (%d Foos): %s", n, 2*n, Breakdown(both)))
		t.Logf("N=%d: %s", n, rows[len(rows)-1])
		deleteNamespaces(t, runs.namespaces...)
	}
	rss := operatorRSS(t)
	Record(t, "foo", strings.Join(append(append([]string{
		"Runs in the order floor, operator, operator, floor; each is timed from its first create to every Deployment with its replica available.",
		"",
		"| N | floor (s), 1st / 4th run | Foos (s), 2nd / 3rd run | ratio of the means | Foos report availableReplicas (s), 2nd / 3rd | writes per Foo | of which deployments / foos/status / events | writes/min settled (2N Foos) | operator live heap after GC (MiB), before the row → with N Foos | operator RSS at the end of the row (MiB) |",
		"|---|---|---|---|---|---|---|---|---|---|",
	}, rows...), append([]string{"", "The operator's writes in the Foos' namespaces until every Foo reported its replica available:"}, breakdowns...)...), "\n")+
		fmt.Sprintf("\n\nThe operator's peak RSS over the whole run (VmHWM, every row and benchmark before it): %d MiB.\n", rss.Peak>>20))
}

// fooWritesIn counts every write request of the operator to ns from the audit
// log, whatever the resource: a Foo's whole cost, including writes nobody
// expected.
func fooWritesIn(t *testing.T, ns string) map[string]int {
	return Writes(t, ns, OperatorUserAgent)
}

// sampleFoo is the i-th Foo of a run, of the sample's shape
// (config/samples): its Deployment named after it, one replica.
func sampleFoo(ns string, i int) *samplev1alpha1.Foo {
	name := fmt.Sprintf("foo-%04d", i)
	return &samplev1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       samplev1alpha1.FooSpec{DeploymentName: name, Replicas: ptr.To[int32](1)},
	}
}

// fooRun is one timed creation of n Foos.
type fooRun struct {
	ns          string
	deployments time.Duration  // until every Foo's Deployment has its replica available: the floor's end point
	foos        time.Duration  // until every Foo shows it: status.availableReplicas 1
	writes      map[string]int // the operator's writes until then
}

// foos creates n Foos in a new namespace ns and times them.
func foos(t *testing.T, n int, ns string) fooRun {
	t.Helper()
	run := fooRun{ns: ns}
	run.deployments, run.foos = timeOperator(t, n, ns, "Foos with availableReplicas 1",
		func(ctx context.Context, i int) error { return k8s.Create(ctx, sampleFoo(ns, i)) },
		&samplev1alpha1.FooList{}, func(f *samplev1alpha1.Foo) bool { return f.Status.AvailableReplicas == 1 })
	run.writes = fooWritesIn(t, ns)
	t.Logf("%s: Deployments available %.1fs, Foos report it %.1fs, %d writes (%s)",
		ns, run.deployments.Seconds(), run.foos.Seconds(), Total(run.writes), Breakdown(run.writes))
	expectOneDeploymentPerFoo(t, n, ns)
	return run
}

// expectOneDeploymentPerFoo checks that the namespace holds exactly n
// Deployments, each controlled by a Foo: the operator made no Deployment
// twice and none for nothing. Correctness, not speed.
func expectOneDeploymentPerFoo(t *testing.T, n int, ns string) {
	t.Helper()
	var list appsv1.DeploymentList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	owners := map[string]bool{}
	for _, d := range list.Items {
		ref := metav1.GetControllerOf(&d)
		if ref == nil || ref.Kind != "Foo" || ref.Name != d.Name || owners[ref.Name] {
			t.Errorf("%s: Deployment %s has controller %v, want its own Foo, once", ns, d.Name, ref)
			continue
		}
		owners[ref.Name] = true
	}
	if len(list.Items) != n {
		t.Errorf("%s: %d Deployments for %d Foos", ns, len(list.Items), n)
	}
}

// fooFloor creates in a new namespace ns the Deployments of n Foos directly,
// as the Foo controller renders them, and returns the time until every one has
// its replica available: what the cluster itself needs for the same objects.
func fooFloor(t *testing.T, n int, ns string) time.Duration {
	t.Helper()
	return timeFloor(t, n, ns, func(ctx context.Context, i int) error {
		return k8s.Create(ctx, plain(fooctrl.Deployment(sampleFoo(ns, i))))
	})
}
