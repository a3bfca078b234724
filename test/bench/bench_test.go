//go:build bench

// Package bench measures the operator against the built-in controllers on a
// local cluster: how long a workload takes to come up, how many pods existed
// at once and how many write requests each controller sent. hack/bench.sh
// (make bench) starts the cluster, without client QPS limits and with an audit
// log of the writes outside the cluster's own namespaces, and the operator.
//
// Speed is measured and written down (BENCH_OUT), never asserted; only
// correctness (no pod beyond the target) fails a benchmark, and so does a
// figure whose source is missing (see package measure). make bench-smoke
// runs every benchmark at tiny sizes (BENCH_SMOKE=1) and records nothing. A
// new benchmark is a Test function in its own file that uses the helpers
// here, reads its sizes with sizesEnv or sizeEnv, and keeps to tiny sizes in
// a smoke run.
package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// OperatorUserAgent is the user agent of every request the operator sends.
const OperatorUserAgent = "kube-envoy-controller"

// BuiltinUserAgent starts the user agent of kube-controller-manager's requests.
const BuiltinUserAgent = "kube-controller-manager"

var (
	k8s client.WithWatch
	cs  kubernetes.Interface
)

func TestMain(m *testing.M) {
	if os.Getenv(loadClientsEnv) != "" {
		runLoadClients() // this process is the xDS benchmark's proxies
		return
	}
	for _, v := range []string{"KUBECONFIG", "BENCH_ROOT", "BENCH_CLUSTER"} {
		if os.Getenv(v) == "" {
			fmt.Fprintln(os.Stderr, "the benchmarks run through hack/bench.sh (make bench), which sets KUBECONFIG, BENCH_ROOT and BENCH_CLUSTER")
			os.Exit(1)
		}
	}
	cfg, err := config.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The benchmark's own reads must not be throttled on the client side.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = BenchUserAgent // not a prefix of the operator's user agent: its writes are not counted as the operator's
	// A write that a webhook had no time for is sent again (a smoke run on
	// a busy machine): a benchmark measures what it times, and a write sent
	// again shows in its latency.
	if k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: manager.NewScheme()}); err == nil {
		k8s = framework.WebhookPatient(k8s)
		cs, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// namespace creates ns and waits for its default ServiceAccount, without which
// no pod is admitted, so that every controller starts on equal terms.
func namespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	testenv.Poll(t, 200*time.Millisecond, time.Minute, "namespace "+ns+"'s default ServiceAccount", func() (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, err
	})
}

// PodTracker follows the pods of one namespace through a watch that resumes
// where it stopped, so that no pod event is missed.
type PodTracker struct {
	target int

	mu         sync.Mutex
	live       map[string]bool // pods that exist
	running    map[string]bool // pods that exist, are Running and are not being deleted
	created    int             // pods seen created
	peak       int             // most pods that existed at once
	allRunning time.Time       // when running first reached target
	err        error
}

// TrackPods starts following ns's pods until ctx ends. All running means
// target pods Running at once.
func TrackPods(t *testing.T, ctx context.Context, ns string, target int) *PodTracker {
	t.Helper()
	pt := &PodTracker{target: target, live: map[string]bool{}, running: map[string]bool{}}
	w := watchEmpty(t, ctx, &corev1.PodList{}, ns)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pt.observe(ev)
		}
	}()
	return pt
}

func (pt *PodTracker) observe(ev watch.Event) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		if ev.Type == watch.Error {
			pt.err = fmt.Errorf("pod watch failed: %v", ev.Object)
		}
		return
	}
	switch ev.Type {
	case watch.Added:
		pt.created++
		pt.live[p.Name] = true
	case watch.Deleted:
		delete(pt.live, p.Name)
	}
	if ev.Type != watch.Deleted && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
		pt.running[p.Name] = true
	} else {
		delete(pt.running, p.Name)
	}
	pt.peak = max(pt.peak, len(pt.live))
	if pt.allRunning.IsZero() && len(pt.running) >= pt.target {
		pt.allRunning = time.Now()
	}
}

// PodStats is what a PodTracker saw.
type PodStats struct {
	Created, Peak, Running int
	AllRunning             time.Time // zero until target pods were Running at once
}

// Stats returns what the tracker has seen so far, or fails t if its watch broke.
func (pt *PodTracker) Stats(t *testing.T) PodStats {
	t.Helper()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.err != nil {
		t.Fatal(pt.err)
	}
	return PodStats{Created: pt.created, Peak: pt.peak, Running: len(pt.running), AllRunning: pt.allRunning}
}

// BenchUserAgent is the user agent of the benchmark's own requests.
const BenchUserAgent = "kec-bench"

// Writes counts the write requests recorded in the cluster's audit log that
// were sent with a user agent starting with userAgent to namespace ns, for the
// given resources ("pods", "replicasets", …; a subresource counts with its
// resource). The result maps "verb resource[/subresource]" to a count.
//
// It fails when the log holds none of the benchmark's own writes to ns (it
// created the objects measured there): then the audit policy does not cover
// ns, and every count would read 0.
func Writes(t *testing.T, ns, userAgent string, resources ...string) map[string]int {
	t.Helper()
	out, err := exec.Command(filepath.Join(os.Getenv("BENCH_ROOT"), "bin", "kwokctl"),
		"--name", os.Getenv("BENCH_CLUSTER"), "logs", "audit").Output()
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	events, err := measure.ParseAudit(out)
	if err != nil {
		t.Fatal(err)
	}
	if own := measure.CountWrites(events, measure.WriteFilter{Namespace: ns, UserAgent: BenchUserAgent}); Total(own) == 0 {
		t.Fatalf("the audit log (%d events) has none of the benchmark's own writes in namespace %s: does test/bench/audit-policy.yaml cover it?", len(events), ns)
	}
	return measure.CountWrites(events, measure.WriteFilter{Namespace: ns, UserAgent: userAgent, Resources: resources})
}

// Total sums the counts of Writes.
func Total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// Breakdown formats the counts of Writes as "verb resource: n, …", sorted.
func Breakdown(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// Smoke reports a smoke run (make bench-smoke): tiny sizes that check the
// harness and the benchmarks' assertions, and no figures.
func Smoke() bool { return os.Getenv("BENCH_SMOKE") == "1" }

// Record logs a benchmark's result and writes it to BENCH_OUT/name.md. A
// smoke run writes nothing and says so.
func Record(t *testing.T, name, text string) {
	t.Helper()
	if Smoke() {
		t.Log("\nsmoke run at tiny sizes, not a measurement; nothing recorded:\n" + text)
		return
	}
	t.Log("\n" + text)
	if dir := os.Getenv("BENCH_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(text), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// sizesEnv reads a list of sizes, such as BENCH_ENVOY_SIZES, or def when unset.
func sizesEnv(t *testing.T, key, def string) []int {
	t.Helper()
	sizes, err := measure.Sizes(envOr(key, def))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return sizes
}

// sizeEnv reads one size, such as BENCH_PODSET_REPLICAS, or def when unset.
func sizeEnv(t *testing.T, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := measure.Size(v)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return n
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envDuration(t *testing.T, key string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("%s: %q is not a duration", key, v)
	}
	return d
}

// operatorRSS reads the operator process's resident memory (OPERATOR_PID).
func operatorRSS(t *testing.T) measure.ProcMemory {
	t.Helper()
	return procMemory(t, envOrFail(t, "OPERATOR_PID"))
}

// operatorHeap makes the operator collect its garbage and returns its heap
// statistics right after: its live heap. It reads them from Go's heap
// profile (--pprof-bind-address, OPERATOR_PPROF_ADDR), whose gc=1 runs a GC
// first, and checks that the GC ran.
func operatorHeap(t *testing.T) measure.HeapStats {
	t.Helper()
	addr := os.Getenv("OPERATOR_PPROF_ADDR")
	if addr == "" {
		t.Fatal("OPERATOR_PPROF_ADDR is not set: run through hack/bench.sh")
	}
	get := func() measure.HeapStats {
		b := httpGet(t, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1")
		h, err := measure.ParseHeapProfile(b)
		if err != nil {
			t.Fatalf("the operator's heap profile: %v", err)
		}
		return h
	}
	// Two collections: finalizers and objects they free take a second one,
	// and the counter of forced GCs shows that they ran.
	first := get()
	h := get()
	if h.NumForcedGC <= first.NumForcedGC {
		t.Fatalf("the operator ran no GC when asked (forced GCs: %d, then %d)", first.NumForcedGC, h.NumForcedGC)
	}
	return h
}

// operatorMetric sums the series of one of the operator's metrics
// (OPERATOR_METRICS_ADDR) that carry labels.
func operatorMetric(t *testing.T, name string, labels map[string]string) (measure.Series, error) {
	t.Helper()
	return measure.Sum(operatorMetrics(t), name, labels)
}

// operatorMetrics reads the operator's metrics, every family at once.
func operatorMetrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	addr := os.Getenv("OPERATOR_METRICS_ADDR")
	if addr == "" {
		t.Fatal("OPERATOR_METRICS_ADDR is not set: run through hack/bench.sh")
	}
	fams, err := measure.ParseMetrics(httpGet(t, "http://"+addr+"/metrics"))
	if err != nil {
		t.Fatalf("the operator's metrics: %v", err)
	}
	return fams
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	c := http.Client{Timeout: time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %.200s", url, resp.Status, b)
	}
	return b
}

// deleteNamespaces deletes namespaces and waits until they are gone with
// everything in them, so that the next measurement starts from a cluster (and
// an operator cache) without them.
func deleteNamespaces(t *testing.T, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range names {
		if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	testenv.Poll(t, time.Second, 15*time.Minute, fmt.Sprintf("namespaces %v to be deleted", names), func() (bool, error) {
		var still []string
		for _, ns := range names {
			err := k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			if err == nil || !apierrors.IsNotFound(err) {
				still = append(still, ns)
			}
		}
		return len(still) == 0, fmt.Errorf("namespaces %v not deleted", still)
	})
}

// Benchmarks against a floor: the operator's objects beside the same
// Deployments created directly. Each N runs four times, floor, operator,
// operator, floor, each in a namespace of its own, so that a drift of the
// machine's load over the row and a fuller cluster weigh on both alike; the
// ratio is that of the two means. Objects are created 32 at a time, and every
// run is timed from its first create to every Deployment of its namespace
// with all its replicas available.

// fourRuns is one N of a benchmark against its floor.
type fourRuns[R any] struct {
	floor      [2]time.Duration // the 1st and 4th runs
	operator   [2]R             // the 2nd and 3rd runs
	namespaces []string         // all four, to delete once the row is done
}

// againstFloor runs floor, operator, operator, floor for one N, in the
// namespaces floorPrefix-N-1, opPrefix-N-1, opPrefix-N-2 and floorPrefix-N-2.
// afterFirst, if not nil, runs between the two operator runs: what is
// measured with N of the operator's objects in place.
func againstFloor[R any](t *testing.T, n int, floorPrefix, opPrefix string,
	floor func(ns string) time.Duration, operator func(ns string) R, afterFirst func()) fourRuns[R] {
	t.Helper()
	name := func(prefix string, k int) string { return fmt.Sprintf("%s-%d-%d", prefix, n, k) }
	var r fourRuns[R]
	r.namespaces = []string{name(floorPrefix, 1), name(opPrefix, 1), name(opPrefix, 2), name(floorPrefix, 2)}
	r.floor[0] = floor(r.namespaces[0])
	r.operator[0] = operator(r.namespaces[1])
	if afterFirst != nil {
		afterFirst()
	}
	r.operator[1] = operator(r.namespaces[2])
	r.floor[1] = floor(r.namespaces[3])
	return r
}

// meanRatio is the mean of the operator's runs over the mean of the floor's.
func meanRatio(floor, operator [2]time.Duration) float64 {
	return (operator[0] + operator[1]).Seconds() / (floor[0] + floor[1]).Seconds()
}

// timeFloor creates namespace ns, then n times what create(i) makes there,
// 32 at a time, and returns the time from the first create until n
// Deployments of ns have all their replicas available: what the cluster
// itself needs for those objects.
func timeFloor(t *testing.T, n int, ns string, create func(ctx context.Context, i int) error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	namespace(t, ns)
	deployments := Follow(t, ctx, &appsv1.DeploymentList{}, ns, n, deploymentAvailable)
	start := time.Now()
	parallel(t, n, 32, func(i int) error { return create(ctx, i) })
	d := deployments.Wait(t, 15*time.Minute, "floor Deployments with their replicas available").Sub(start)
	t.Logf("%s: Deployments available %.1fs", ns, d.Seconds())
	return d
}

// timeOperator creates namespace ns, then n of the operator's objects with
// create(i), 32 at a time, and times from the first create until n
// Deployments of ns have all their replicas available (the floor's end
// point), and until n objects of list's kind show it in their status
// (reported). what names those objects in a failure.
func timeOperator[T client.Object](t *testing.T, n int, ns, what string, create func(ctx context.Context, i int) error,
	list client.ObjectList, reported func(T) bool) (deployments, status time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	namespace(t, ns)
	available := Follow(t, ctx, &appsv1.DeploymentList{}, ns, n, deploymentAvailable)
	shown := Follow(t, ctx, list, ns, n, reported)
	start := time.Now()
	parallel(t, n, 32, func(i int) error { return create(ctx, i) })
	deployments = available.Wait(t, 15*time.Minute, "Deployments with their replicas available").Sub(start)
	status = shown.Wait(t, 15*time.Minute, what).Sub(start)
	return deployments, status
}

// deploymentAvailable reports whether all of d's replicas are available.
func deploymentAvailable(d *appsv1.Deployment) bool {
	return d.Status.AvailableReplicas == ptr.Deref(d.Spec.Replicas, 1)
}

// A Follower counts the objects of one kind in one namespace that meet a
// condition, from a watch that resumes where it stopped, and notes when
// that count first reached its target. The benchmarks wait with it rather
// than by listing the namespace again and again: a list of a thousand
// objects every quarter second is work for the API server and for this
// process, on the 2 cores the runs share, and it was more work in the
// operator's runs (two lists a tick, one of them JSON) than in the floor's
// (one). A watch event, encoded once for every watcher, costs next to
// nothing, and the moment the target is reached is known to the event.
type Follower[T client.Object] struct {
	ns     string
	target int
	meets  func(T) bool
	done   chan struct{} // closed when the target is reached or the watch fails

	mu      sync.Mutex
	met     map[string]bool // the objects that meet the condition
	reached time.Time       // when the target was first reached
	err     error
}

// Follow starts following the objects of list's kind in ns, which must hold
// none yet, until ctx ends. meets is the condition, and target the count
// whose moment Wait returns.
func Follow[T client.Object](t *testing.T, ctx context.Context, list client.ObjectList, ns string, target int, meets func(T) bool) *Follower[T] {
	t.Helper()
	f := newFollower(ns, target, meets)
	w := watchEmpty(t, ctx, list, ns)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			f.observe(ev)
		}
	}()
	return f
}

func newFollower[T client.Object](ns string, target int, meets func(T) bool) *Follower[T] {
	return &Follower[T]{ns: ns, target: target, meets: meets, done: make(chan struct{}), met: map[string]bool{}}
}

// watchEmpty watches the objects of list's kind in ns, which must hold none
// yet, from the list's resource version on, resuming where it stopped, until
// ctx ends: none of their events is missed.
func watchEmpty(t *testing.T, ctx context.Context, list client.ObjectList, ns string) watch.Interface {
	t.Helper()
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if n := meta.LenList(list); n > 0 {
		t.Fatalf("namespace %s already has %d objects of %T", ns, n, list)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return k8s.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(ns), &client.ListOptions{Raw: &o})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// observe takes one event in.
func (f *Follower[T]) observe(ev watch.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, ok := ev.Object.(T)
	switch {
	case !ok && ev.Type == watch.Error:
		if f.err == nil && f.reached.IsZero() {
			f.err = fmt.Errorf("the watch failed: %v", ev.Object)
			close(f.done)
		}
		return
	case !ok:
		return
	case ev.Type != watch.Deleted && f.meets(obj):
		f.met[obj.GetName()] = true
	default:
		delete(f.met, obj.GetName())
	}
	if f.reached.IsZero() && f.err == nil && len(f.met) >= f.target {
		f.reached = time.Now()
		close(f.done)
	}
}

// Wait waits up to timeout for the target and returns when it was reached.
// It fails t on a timeout or a broken watch; what names the objects counted.
func (f *Follower[T]) Wait(t *testing.T, timeout time.Duration, what string) time.Time {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(timeout):
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.err != nil:
		t.Fatalf("waiting for %d %s in %s: %v", f.target, what, f.ns, f.err)
	case f.reached.IsZero():
		t.Fatalf("timed out waiting for %d %s in %s: %d", f.target, what, f.ns, len(f.met))
	}
	return f.reached
}

// plain makes one of the operator's rendered objects a plain one for a
// floor: no owner, and not labelled as the operator's, so that the
// operator's cache (which holds only its own objects) does not take it in.
func plain(obj client.Object) client.Object {
	obj.SetOwnerReferences(nil)
	labels := obj.GetLabels()
	delete(labels, names.ManagedByLabel)
	obj.SetLabels(labels)
	if d, ok := obj.(*appsv1.Deployment); ok {
		delete(d.Spec.Template.Labels, names.ManagedByLabel)
	}
	return obj
}

// settledPerMinute waits settle and returns by how much count grew meanwhile,
// per minute: the writes of a workload that should have nothing left to do.
// A count that went down means the audit log lost lines, and fails t.
func settledPerMinute(t *testing.T, settle time.Duration, count func() int) float64 {
	t.Helper()
	before := count()
	time.Sleep(settle)
	after := count()
	if after < before {
		t.Fatalf("the audit log counted %d writes, then %d: it lost lines (rotated?)", before, after)
	}
	if settle == 0 {
		return 0
	}
	return float64(after-before) / settle.Minutes()
}

// parallel runs create(i) for i in [0, n) on the given number of workers,
// and fails the test with the first error.
func parallel(t *testing.T, n, workers int, create func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range workers {
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

func mib(b int64) float64 { return float64(b) / (1 << 20) }
