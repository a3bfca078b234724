package status_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// A real API server, and no controller: the tests write statuses themselves.
var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.Main(m, func(ctrl.Manager) error { return nil })
}

// Finish with a stale copy, as the cache holds one for seconds after an API
// server restart: with Writer.Live, the status is written onto the API
// server's copy of the same generation, and nothing is requeued; without it,
// or when the spec changed since, the conflict is requeued.
func TestFinishWithAStaleCopy(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	w := &watchv1alpha1.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns},
		Spec:       watchv1alpha1.WatcherSpec{Container: corev1.Container{Name: "tail", Image: "busybox"}},
	}
	if err := suite.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	stale := w.DeepCopy()
	// Someone else's change, which the stale copy lacks: the generation stays.
	patch := client.MergeFrom(w.DeepCopy())
	w.Annotations = map[string]string{"someone/else": "was here"}
	if err := suite.Client.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	writer := status.Writer{Client: suite.Client, Recorder: suite.Manager.GetEventRecorder("test")}
	setName := func(name string) func(*watchv1alpha1.Watcher) {
		return func(out *watchv1alpha1.Watcher) {
			out.Status = watchv1alpha1.WatcherStatus{ConfigMapName: name, ObservedGeneration: stale.Generation}
		}
	}
	live := func() *watchv1alpha1.Watcher {
		got := &watchv1alpha1.Watcher{}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// Without Live: requeued, nothing written.
	res, err := status.Finish(ctx, writer, stale.DeepCopy(), nil, setName("without"))
	if err != nil || res.RequeueAfter != status.ConflictRetry {
		t.Errorf("without Live: %+v, %v; want a requeue after %s", res, err, status.ConflictRetry)
	}
	if got := live().Status.ConfigMapName; got != "" {
		t.Errorf("without Live, the status was written: %q", got)
	}

	// With Live: written onto the API server's copy, which keeps the change.
	writer.Live = suite.Client
	res, err = status.Finish(ctx, writer, stale.DeepCopy(), nil, setName("with"))
	if err != nil || res != (ctrl.Result{}) {
		t.Errorf("with Live: %+v, %v; want done", res, err)
	}
	if got := live(); got.Status.ConfigMapName != "with" || got.Annotations["someone/else"] != "was here" {
		t.Errorf("with Live: status %+v, annotations %v", got.Status, got.Annotations)
	}

	// A new spec since: the status computed for the old one is not written.
	cur := live()
	cur.Spec.Container.Image = "busybox:2"
	if err := suite.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	res, err = status.Finish(ctx, writer, stale.DeepCopy(), nil, setName("old spec"))
	if err != nil || res.RequeueAfter != status.ConflictRetry {
		t.Errorf("a new spec since: %+v, %v; want a requeue after %s", res, err, status.ConflictRetry)
	}
	if got := live().Status.ConfigMapName; got != "with" {
		t.Errorf("a status computed for an older spec was written: %q", got)
	}
}

// Finish of an object deleted while it was reconciled (a Gateway's fleet
// that the garbage collector removed with its Gateway, say) ends without an
// error: a deleted object needs no status, and nothing is requeued.
func TestFinishOfADeletedObject(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	w := &watchv1alpha1.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns},
		Spec:       watchv1alpha1.WatcherSpec{Container: corev1.Container{Name: "tail", Image: "busybox"}},
	}
	if err := suite.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := suite.Client.Delete(ctx, w.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	writer := status.Writer{Client: suite.Client, Recorder: suite.Manager.GetEventRecorder("test"), Live: suite.Client}
	res, err := status.Finish(ctx, writer, w, nil, func(out *watchv1alpha1.Watcher) {
		out.Status = watchv1alpha1.WatcherStatus{ConfigMapName: "any", ObservedGeneration: w.Generation}
	})
	if err != nil || res.RequeueAfter != 0 {
		t.Errorf("Finish = %+v, %v; want nothing to retry", res, err)
	}
}
