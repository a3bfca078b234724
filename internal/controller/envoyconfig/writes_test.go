package envoyconfig

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// A decision that only marks a revision accepted writes nothing; the mark
// is known from memory or from the status, and goes with the next write.
func TestAcceptedMarkWaitsForTheNextWrite(t *testing.T) {
	stored := publish.History{Current: "v2", Revisions: []publish.Revision{{Version: "v2"}, {Version: "v1", Acked: true}}}
	marked := publish.History{Current: "v2", Revisions: []publish.Revision{{Version: "v2", Acked: true}, {Version: "v1", Acked: true}}}
	if changedBeyondAccepted(publish.Decision{History: marked}, stored) {
		t.Error("a decision that only marks v2 accepted is a write")
	}
	published := publish.History{Current: "v3", Revisions: append([]publish.Revision{{Version: "v3"}}, marked.Revisions...)}
	if !changedBeyondAccepted(publish.Decision{History: published}, stored) {
		t.Error("a decision that publishes v3 is no write")
	}

	id := fleet.ID{Namespace: "ns", Name: "edge"}
	vouching := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"},
		Status: examplev1.EnvoyConfigStatus{PublishedVersion: "v2", Proxies: examplev1.ProxyStatus{Connected: 3, Acked: 3}}}
	partly := vouching.DeepCopy()
	partly.Status.Proxies.Acked = 2
	for _, c := range []struct {
		what    string
		configs []*examplev1.EnvoyConfig
		noted   *publish.History
		want    bool
	}{
		{"nothing known", nil, nil, false},
		{"a status that says every proxy accepted v2", []*examplev1.EnvoyConfig{vouching}, nil, true},
		{"a status that says some did", []*examplev1.EnvoyConfig{partly}, nil, false},
		{"the leader found it so", nil, &marked, true},
	} {
		var a acceptedMarks
		if c.noted != nil {
			a.note(id, *c.noted)
		}
		h := a.marked(&world{id: id, configs: c.configs}, stored)
		if got := h.Served().Acked; got != c.want {
			t.Errorf("%s: v2 marked accepted %v, want %v", c.what, got, c.want)
		}
		if stored.Revisions[0].Acked {
			t.Fatalf("%s: the stored history was marked", c.what)
		}
	}
	// A revision every proxy rejected is not marked.
	rejected := publish.History{Current: "v2", Revisions: []publish.Revision{{Version: "v2", Rejected: "no"}}}
	if h := new(acceptedMarks).marked(&world{id: id, configs: []*examplev1.EnvoyConfig{vouching}}, rejected); h.Served().Acked {
		t.Error("a rejected revision was marked accepted")
	}
}

// The status of a fleet that serves a new revision waits for every
// replica with proxies of the fleet to report that revision, at most
// answersWait.
func TestStatusWaitsForTheReports(t *testing.T) {
	id := fleet.ID{Namespace: "ns", Name: "edge"}
	h := publish.History{Current: "v2", Revisions: []publish.Revision{{Version: "v2"}}}
	behind := []report.Report{{id.String(): {Version: "v2", Connected: 2, Acked: 2}}, {id.String(): {Version: "v1", Connected: 2, Acked: 2}}}
	caughtUp := []report.Report{behind[0], {id.String(): {Version: "v2", Connected: 2, Acked: 1}}}
	noProxies := []report.Report{behind[0], {id.String(): {Version: "v1"}}}
	start := time.Unix(1000, 0)
	var a awaitingAnswers
	if got := a.wait(id, h, behind, start); got != answersWait {
		t.Errorf("a replica behind: wait %v, want %v", got, answersWait)
	}
	if got := a.wait(id, h, behind, start.Add(time.Second)); got != answersWait-time.Second {
		t.Errorf("a second later: wait %v, want %v", got, answersWait-time.Second)
	}
	if got := a.wait(id, h, behind, start.Add(answersWait)); got != 0 {
		t.Errorf("once answersWait passed: wait %v, want 0", got)
	}
	if got := a.wait(id, h, caughtUp, start); got != 0 {
		t.Errorf("every replica reports v2: wait %v, want 0", got)
	}
	if got := a.wait(id, h, noProxies, start); got != 0 {
		t.Errorf("the replica behind has no proxy connected: wait %v, want 0", got)
	}
	rolling := h
	rolling.Rollout = &publish.Rollout{Revision: "v2", Previous: "v1"}
	if got := a.wait(id, rolling, behind, start); got != 0 {
		t.Errorf("a rollout: wait %v, want 0", got)
	}
	// A new revision waits afresh.
	a.wait(id, h, behind, start)
	h3 := publish.History{Current: "v3", Revisions: []publish.Revision{{Version: "v3"}}}
	if got := a.wait(id, h3, behind, start.Add(answersWait)); got != answersWait {
		t.Errorf("a new revision: wait %v, want %v", got, answersWait)
	}
}

// The leader's status write of a change moves, besides what statusOnly
// ignores, status.publishedVersion and the edited EnvoyConfig's
// status.contentHash: neither wakes a replica while the fleet has no
// legacy history and no status names a rejected version.
func TestStatusWriteOfAChangeWakesNoOne(t *testing.T) {
	// The legacy history is read from the manager's cache, as the
	// controller's predicates read it: from events of a started cache. A
	// test that runs first may come before the cache has started.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if !suite.Manager.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the manager's cache did not start")
	}
	r := &Reconciler{Client: suite.Manager.GetClient(), Namespace: operatorNamespace}
	base := &examplev1.EnvoyConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "no-legacy", Generation: 2, ResourceVersion: "10"},
		Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: "edge"},
		Status:     examplev1.EnvoyConfigStatus{PublishedVersion: "v1", ContentHash: "h1", Proxies: examplev1.ProxyStatus{Connected: 3, Acked: 3}},
	}
	for _, c := range []struct {
		what   string
		change func(*examplev1.EnvoyConfig)
		reads  bool
	}{
		{"publishedVersion and the proxies' counts", func(c *examplev1.EnvoyConfig) { c.Status.PublishedVersion, c.Status.Proxies.Acked = "v2", 0 }, false},
		{"contentHash", func(c *examplev1.EnvoyConfig) { c.Status.ContentHash = "h2" }, false},
		{"contentHash, with a rejected version", func(c *examplev1.EnvoyConfig) {
			c.Status.ContentHash, c.Status.RejectedVersions = "h2", []string{"v0"}
		}, true},
		{"publishedVersion and rejectedVersions", func(c *examplev1.EnvoyConfig) {
			c.Status.PublishedVersion, c.Status.RejectedVersions = "v2", []string{"v0"}
		}, true},
		{"nothing but the resourceVersion", func(*examplev1.EnvoyConfig) {}, false},
		{"the spec", func(c *examplev1.EnvoyConfig) { c.Generation, c.Status.PublishedVersion = 3, "v2" }, true},
	} {
		updated := base.DeepCopy()
		updated.ResourceVersion = "11"
		c.change(updated)
		wakes := !statusOnly(base, updated) && !r.readsNothingNew(base, updated)
		if wakes != c.reads {
			t.Errorf("%s: wakes %v, want %v", c.what, wakes, c.reads)
		}
	}
}

// An edit of an EnvoyConfig's spec wakes no follower of a fleet whose
// history is recorded: it serves the recorded revision, and the leader's
// record of the edit wakes it. The leader, an edit that moves the
// EnvoyConfig to another fleet, one that changes its metadata too, and an
// edit of a fleet with no history wake it.
func TestEditWakesNoFollower(t *testing.T) {
	id := fleet.ID{Namespace: "edits", Name: "edge"}
	cm, err := history.ConfigMap(operatorNamespace, id, publish.History{Current: "v1", Revisions: []publish.Revision{{Version: "v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithObjects(cm).Build()
	base := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: id.Namespace, Generation: 1, ResourceVersion: "10"},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: id.Name}}
	for _, e := range []struct {
		what   string
		leader bool
		change func(*examplev1.EnvoyConfig)
		wakes  bool
	}{
		{"a follower, an edit", false, func(c *examplev1.EnvoyConfig) { c.Generation++ }, false},
		{"the leader, an edit", true, func(c *examplev1.EnvoyConfig) { c.Generation++ }, true},
		{"a follower, an edit that moves it to another fleet", false, func(c *examplev1.EnvoyConfig) { c.Generation, c.Spec.EnvoyRef = 2, "other" }, true},
		{"a follower, an edit with an annotation", false, func(c *examplev1.EnvoyConfig) { c.Generation, c.Annotations = 2, map[string]string{"k": "v"} }, true},
		{"a follower, an annotation", false, func(c *examplev1.EnvoyConfig) { c.Annotations = map[string]string{"k": "v"} }, true},
		{"a follower, an edit of a fleet with no history", false, func(c *examplev1.EnvoyConfig) { c.Generation, c.Namespace = 2, "elsewhere" }, true},
	} {
		old := base.DeepCopy()
		if e.what == "a follower, an edit of a fleet with no history" {
			old.Namespace = "elsewhere"
		}
		updated := old.DeepCopy()
		updated.ResourceVersion = "11"
		e.change(updated)
		leader := e.leader
		r := &Reconciler{Client: c, Namespace: operatorNamespace, IsLeader: func() bool { return leader }}
		if wakes := !r.servedAsRecorded(old, updated); wakes != e.wakes {
			t.Errorf("%s: wakes %v, want %v", e.what, wakes, e.wakes)
		}
	}
}

// The report of a replica that is gone, left behind, is left out: once a
// status waited answersWait for it to report the fleet's revision, the
// leader asks after its owner, a pod. A Ready pod's replica runs, and its
// proxies count; one whose pod is not Ready any more serves no proxy.
func TestLeftoverReportOfAGoneReplica(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "replica-" + ns, Namespace: operatorNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "manager"}}}}
	create(t, pod)
	t.Cleanup(func() { _ = suite.Client.Delete(ctx, pod) })
	setReady := func(status corev1.ConditionStatus) {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if err := suite.Client.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	setReady(corev1.ConditionTrue)
	shards, err := report.Shards(operatorNamespace, pod.Name, report.Report{fleetID: {Version: "earlier", Connected: 5, Acked: 5}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	shards[0].OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	create(t, shards[0])
	t.Cleanup(func() { _ = suite.Client.Delete(ctx, shards[0]) })

	cfg := newConfig(ns, "a", cluster("a", "1s"))
	create(t, cfg)
	waitStatus(t, cfg, "the status, with the proxies of a replica that runs", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion != "" && c.Status.Proxies.Connected == 5 && c.Status.Proxies.Acked == 0
	})

	setReady(corev1.ConditionFalse)
	suite.Touch(t, ControllerName, cfg)
	waitStatus(t, cfg, "the report of the replica that is gone left out", func(c *examplev1.EnvoyConfig) bool {
		return c.Status.PublishedVersion != "" && c.Status.Proxies.Connected == 0
	})
}
