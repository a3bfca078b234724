package envoyconfig

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// fleetReads counts, by fleet, the reads of a fleet's EnvoyConfigs that
// every reconcile of a fleet begins with (read.go): the fleet's reconciles.
type fleetReads struct {
	client.Client
	mu sync.Mutex
	n  map[string]int
}

func (c *fleetReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*examplev1.EnvoyConfigList); ok {
		o := (&client.ListOptions{}).ApplyOptions(opts)
		if o.FieldSelector != nil {
			if name, ok := o.FieldSelector.RequiresExactMatch(envoyRefIndex); ok {
				c.mu.Lock()
				c.n[o.Namespace+"/"+name]++
				c.mu.Unlock()
			}
		}
	}
	return c.Client.List(ctx, list, opts...)
}

func (c *fleetReads) of(fleetID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[fleetID]
}

// countedReplica is a replica of its own, beside the suite's: its manager,
// xDS server (plaintext) and EnvoyConfig controller, with its write
// requests and its reconciles of each fleet counted.
type countedReplica struct {
	name       string
	controller string // its controller's name, unique in the process
	srv        *server.Server
	writes     *testenv.RequestCounter
	reconciles *fleetReads
}

func startReplica(t *testing.T, name string, leader bool) *countedReplica {
	t.Helper()
	rep := &countedReplica{name: name, writes: &testenv.RequestCounter{}}
	rep.srv, rep.controller = startReplicaWith(t, name, rep.writes.Wrap(adminConfig()), func() bool { return leader }, func(r *Reconciler) {
		rep.reconciles = &fleetReads{Client: r.Client, n: map[string]int{}}
		r.Client = rep.reconciles
	})
	return rep
}

// connectProxies connects n proxies of fleetID to the replica, each asking
// for every cluster and ACKing whatever it is sent, until the test ends.
func (rep *countedReplica) connectProxies(t *testing.T, fleetID string, n int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	addr, err := rep.srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := xdstest.Dial(t, addr.String())
	for i := range n {
		p := xdstest.Connect(t, c, fleetID, fmt.Sprintf("%s-pod-%d", rep.name, i), resourcev3.ClusterType)
		p.Timeout = time.Hour // the test's end closes the stream
		go func() {
			for {
				if _, err := p.Next(""); err != nil {
					return
				}
			}
		}()
	}
}

// cost is what one change cost a replica: its write requests, by kind,
// and its reconciles of the fleet.
type cost struct {
	writes     map[string]int
	reconciles int
}

func (c cost) total() int {
	n := 0
	for _, v := range c.writes {
		n += v
	}
	return n
}

func (c cost) String() string {
	kinds := make([]string, 0, len(c.writes))
	for k := range c.writes {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.writes[k]))
	}
	return fmt.Sprintf("%d writes (%s), %d reconciles of the fleet", c.total(), strings.Join(parts, ", "), c.reconciles)
}

// writeKind names what a write request, "METHOD path", writes.
func writeKind(w string) string {
	switch {
	case strings.Contains(w, "/configmaps/kube-envoy-controller-xds-history-"):
		return "history"
	case strings.Contains(w, "/configmaps/kube-envoy-controller-xds-proxies-"):
		return "report shard"
	case strings.Contains(w, "/envoyconfigs/") && strings.HasSuffix(w, "/status"):
		return "EnvoyConfig status"
	case strings.Contains(w, "/events"):
		return "event"
	}
	return w
}

func (rep *countedReplica) cost(fleetID string, since int) cost {
	c := cost{writes: map[string]int{}, reconciles: rep.reconciles.of(fleetID) - since}
	for _, w := range rep.writes.Writes() {
		c.writes[writeKind(w)]++
	}
	return c
}

// quiet waits until the replicas have sent no write request and begun no
// reconcile of the fleet for a second, and neither their controllers nor
// the suite's have anything queued or running.
func quiet(t *testing.T, fleetID string, reps ...*countedReplica) {
	t.Helper()
	testenv.Steady(t, time.Second, testenv.Timeout, "the replicas to go quiet", func() (string, error) {
		now, idle := "", testenv.Idle(ControllerName)
		for _, rep := range reps {
			now += fmt.Sprintf("%d/%d ", len(rep.writes.Writes()), rep.reconciles.of(fleetID))
			idle = idle && testenv.Idle(rep.controller)
		}
		if !idle {
			return "", fmt.Errorf("writes/reconciles %s, and a controller has work queued or running", now)
		}
		return now, nil
	})
}

// A change of one EnvoyConfig of a settled fleet, served by two replicas
// with 50 proxies each, costs three rounds of writes: the leader records
// the new revision in the history once, each replica writes its report
// once its proxies have answered, and the leader writes each EnvoyConfig's
// status once, with their answers (not at once with none, then again).
// The history's mark that the proxies accepted the revision waits for the
// history's next write. A replica is woken only by what may change what
// it serves or reports: a follower by the history's new revision, the
// leader by the edit and the reports (docs/benchmarks.md has
// the counts before and after).
func TestOneChangeCostsFewWritesAndWakeUps(t *testing.T) {
	const perReplica int32 = 50
	pauseLeader(t) // the suite's replica only serves, and has no proxy of the fleet
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	leader := startReplica(t, "replica-leader", true)
	follower := startReplica(t, "replica-follower", false)
	var configs []*examplev1.EnvoyConfig
	for _, name := range []string{"one", "two", "three"} {
		cfg := newConfig(ns, name, cluster(name, "1s"))
		create(t, cfg)
		configs = append(configs, cfg)
	}
	leader.connectProxies(t, fleetID, perReplica)
	follower.connectProxies(t, fleetID, perReplica)
	ackedBy := func(what string, all int32) string {
		version := ""
		for _, cfg := range configs {
			got := waitStatus(t, cfg, what, func(c *examplev1.EnvoyConfig) bool {
				return c.Status.PublishedVersion != "" && c.Status.Proxies.Acked == all && c.Status.Proxies.Connected == all &&
					(version == "" || c.Status.PublishedVersion == version)
			})
			version = got.Status.PublishedVersion
		}
		return version
	}
	before := ackedBy("every proxy to ACK the first version", 2*perReplica)
	quiet(t, fleetID, leader, follower)

	// Every update of the EnvoyConfigs from here on, as the API server
	// tells it: a status write that changes nothing is no update.
	updates := countUpdates(t, ns)
	leader.writes.Reset()
	follower.writes.Reset()
	leaderSince, followerSince := leader.reconciles.of(fleetID), follower.reconciles.of(fleetID)
	patch := client.MergeFrom(configs[0].DeepCopy())
	configs[0].Spec.Resources.Clusters = []runtime.RawExtension{cluster("one", "2s")}
	if err := suite.Client.Patch(ctx, configs[0], patch); err != nil {
		t.Fatal(err)
	}
	after := ""
	testenv.Eventually(t, "every status to show the change ACKed by every proxy", func() (bool, error) {
		after = ""
		for _, cfg := range configs {
			got := &examplev1.EnvoyConfig{}
			if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(cfg), got); err != nil {
				return false, err
			}
			if got.Status.PublishedVersion == before || got.Status.Proxies.Acked != 2*perReplica ||
				after != "" && got.Status.PublishedVersion != after {
				return false, nil
			}
			after = got.Status.PublishedVersion
		}
		return true, nil
	})
	quiet(t, fleetID, leader, follower)
	lc, fc := leader.cost(fleetID, leaderSince), follower.cost(fleetID, followerSince)
	t.Logf("one change, %d proxies on each of 2 replicas, 3 EnvoyConfigs: leader %v; follower %v", perReplica, lc, fc)

	// Each replica writes its report when its proxies have answered: once,
	// or twice when they take longer than the report interval to answer
	// (the write at the interval, then the one with their answers).
	for _, c := range []struct {
		name string
		cost
	}{{"leader", lc}, {"follower", fc}} {
		if n := c.writes["report shard"]; n < 1 || n > 2 {
			t.Errorf("the %s wrote its report %d times, want once, or twice for proxies slower than the interval: %v", c.name, n, c)
		}
	}
	// The leader records the revision once, and writes each EnvoyConfig's
	// status once: three rounds of writes with the replicas' reports.
	if n := lc.writes["history"]; n != 1 {
		t.Errorf("the leader wrote the history %d times, want once (the accepted mark waits for the next write): %v", n, lc)
	}
	if n := lc.writes["EnvoyConfig status"]; n > len(configs) {
		t.Errorf("the leader sent %d status writes, want at most one per EnvoyConfig (%d): %v", n, len(configs), lc)
	}
	if n := lc.total() - lc.writes["report shard"] - lc.writes["history"] - lc.writes["EnvoyConfig status"]; n != 0 {
		t.Errorf("the leader wrote %d more: %v", n, leader.writes.Writes())
	}
	// The follower writes nothing else.
	if fc.total() != fc.writes["report shard"] {
		t.Errorf("the follower wrote more than its report: %v", follower.writes.Writes())
	}
	// The follower is woken by the history's new revision alone: not by
	// the edit (it serves what is recorded), the replicas' reports, nor the
	// leader's status writes, which move status.publishedVersion (read
	// only to adopt a legacy history, and the fleet has none) and the
	// edited EnvoyConfig's status.contentHash (read only with
	// status.rejectedVersions).
	if max := lc.writes["history"]; fc.reconciles > max {
		t.Errorf("the follower reconciled the fleet %d times, want at most %d: the history's new revision", fc.reconciles, max)
	}
	// The leader is woken by the edit and by each replica's report; not by
	// its history write or its status writes. (Wake-ups that come while a
	// reconcile is queued are one, so fewer is usual.) Each status write it
	// sends changes the EnvoyConfig.
	if max := 1 + lc.writes["report shard"] + fc.writes["report shard"]; lc.reconciles > max {
		t.Errorf("the leader reconciled the fleet %d times, want at most %d: the edit and each report written", lc.reconciles, max)
	}
	if got, want := lc.writes["EnvoyConfig status"], updates()-1; got != want {
		t.Errorf("the leader sent %d status writes, and %d changed an EnvoyConfig", got, want)
	}
}

// countUpdates counts the updates of the EnvoyConfigs of ns from now until
// the test ends, as a watch of the API server sees them; it returns how
// many have come so far.
func countUpdates(t *testing.T, ns string) func() int {
	t.Helper()
	c, err := client.NewWithWatch(adminConfig(), client.Options{Scheme: suite.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var list examplev1.EnvoyConfigList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), &examplev1.EnvoyConfigList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var n atomic.Int64
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				n.Add(1)
			}
		}
	}()
	return func() int { return int(n.Load()) }
}

// An update of an EnvoyConfig that changes only what no reconcile reads of
// its status wakes no replica; one that changes its spec, its metadata, or
// what the status tells a decision or a legacy history's adoption does.
func TestStatusOnlyUpdates(t *testing.T) {
	base := &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Generation: 2, ResourceVersion: "10"},
		Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "edge"},
		Status: examplev1.EnvoyConfigStatus{PublishedVersion: "v1", ContentHash: "h1",
			Proxies:    examplev1.ProxyStatus{Connected: 3, Acked: 1},
			Conditions: []metav1.Condition{{Type: examplev1.EnvoyConfigConditionPublished, Status: metav1.ConditionTrue, Reason: examplev1.EnvoyConfigReasonPublished, ObservedGeneration: 2}}},
	}
	for _, c := range []struct {
		what   string
		change func(*examplev1.EnvoyConfig)
		only   bool
	}{
		{"the proxies' counts", func(c *examplev1.EnvoyConfig) { c.Status.Proxies.Acked = 3 }, true},
		{"a condition's message", func(c *examplev1.EnvoyConfig) { c.Status.Conditions[0].Message = "served" }, true},
		{"nothing but the resourceVersion", func(*examplev1.EnvoyConfig) {}, true},
		{"the spec", func(c *examplev1.EnvoyConfig) { c.Generation, c.Spec.EnvoyRef = 3, "other" }, false},
		{"an annotation", func(c *examplev1.EnvoyConfig) { c.Annotations = map[string]string{"k": "v"} }, false},
		{"the deletion", func(c *examplev1.EnvoyConfig) { c.DeletionTimestamp = &metav1.Time{} }, false},
		{"status.publishedVersion", func(c *examplev1.EnvoyConfig) { c.Status.PublishedVersion = "v2" }, false},
		{"status.rejectedVersions", func(c *examplev1.EnvoyConfig) { c.Status.RejectedVersions = []string{"v2"} }, false},
		{"status.contentHash", func(c *examplev1.EnvoyConfig) { c.Status.ContentHash = "h2" }, false},
		{"a rejection in Published", func(c *examplev1.EnvoyConfig) {
			c.Status.Conditions[0].Status, c.Status.Conditions[0].Reason = metav1.ConditionFalse, examplev1.EnvoyConfigReasonRolledBack
		}, false},
	} {
		updated := base.DeepCopy()
		updated.ResourceVersion = "11"
		c.change(updated)
		if got := statusOnly(base, updated); got != c.only {
			t.Errorf("%s: statusOnly = %v, want %v", c.what, got, c.only)
		}
	}
}

// Which events of the control plane's ConfigMaps wake a replica. The
// leader: every replica's report, someone else's write of a history, and
// a deleted history, its own writes but not their events. A follower: no
// report, and no update of a history that leaves the version it serves as
// it is.
func TestControlPlaneConfigMapWakeUps(t *testing.T) {
	ctx := context.Background()
	id := fleet.ID{Namespace: "wakeups", Name: "edge"}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}}
	srv := server.New("127.0.0.1:0", logr.Discard())
	if err := srv.SetFleet(ctx, id.String(), "v1", nil); err != nil {
		t.Fatal(err)
	}
	historyAt := func(current string, acked bool) *corev1.ConfigMap {
		cm, err := history.ConfigMap(operatorNamespace, id, publish.History{Current: current,
			Revisions: []publish.Revision{{Version: current, Acked: acked}}})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	shard := func(acked int) *corev1.ConfigMap {
		shards, err := report.Shards(operatorNamespace, "replica-x", report.Report{id.String(): {Version: "v1", Connected: 2, Acked: acked}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return shards[0]
	}
	for _, c := range []struct {
		what   string
		leader bool
		event  func(controlPlaneConfigMaps, workqueue.TypedRateLimitingInterface[reconcile.Request])
		wakes  bool
	}{
		{"the leader, its own write of the history", true, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: historyAt("v1", false), ObjectNew: historyAt("v1", true)}, q)
		}, false},
		{"the leader, someone else's write of the history", true, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: historyAt("v1", true), ObjectNew: historyAt("v1", false)}, q)
		}, true},
		{"the leader, someone else's annotation on its history", true, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			annotated := historyAt("v1", true)
			annotated.Annotations["note"] = "mine"
			h.Update(ctx, event.UpdateEvent{ObjectOld: historyAt("v1", true), ObjectNew: annotated}, q)
		}, true},
		{"the leader, its history deleted", true, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, event.DeleteEvent{Object: historyAt("v1", true)}, q)
		}, true},
		{"the leader, a report", true, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: shard(0), ObjectNew: shard(2)}, q)
		}, true},
		{"a follower, a report", false, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: shard(0), ObjectNew: shard(2)}, q)
		}, false},
		{"a follower, the version it serves marked accepted", false, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: historyAt("v1", false), ObjectNew: historyAt("v1", true)}, q)
		}, false},
		{"a follower, a new version", false, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: historyAt("v1", true), ObjectNew: historyAt("v2", false)}, q)
		}, true},
		{"a follower, a version it does not serve marked accepted", false, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: historyAt("v0", false), ObjectNew: historyAt("v0", true)}, q)
		}, true},
		{"a follower, the history deleted", false, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, event.DeleteEvent{Object: historyAt("v1", true)}, q)
		}, true},
		{"a follower, a history created", false, func(h controlPlaneConfigMaps, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: historyAt("v1", true)}, q)
		}, true},
	} {
		leader := c.leader
		r := &Reconciler{Namespace: operatorNamespace, Server: srv, IsLeader: func() bool { return leader }}
		// The leader recorded v1, accepted.
		r.ownHistories.remember(operatorNamespace, id, publish.History{Current: "v1", Revisions: []publish.Revision{{Version: "v1", Acked: true}}})
		h := controlPlaneConfigMaps{r}
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		c.event(h, q)
		if got := testenv.Drain(q)[req]; got != c.wakes {
			t.Errorf("%s: woken %v, want %v", c.what, got, c.wakes)
		}
		q.ShutDown()
	}
}
