package watcher

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.MainWith(m, func(mgr ctrl.Manager) testenv.Controller { return NewReconciler(mgr) })
}

func newWatcher(ns, name string) *watchv1alpha1.Watcher {
	return &watchv1alpha1.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: watchv1alpha1.WatcherSpec{
			Container:  corev1.Container{Name: "tail", Image: "busybox"},
			ConfigData: map[string]string{"LEVEL": "debug"},
		},
	}
}

func readyWatcher(w *watchv1alpha1.Watcher) bool {
	return testenv.Observed(w) && conditions.IsTrue(w.Status.Conditions, watchv1alpha1.WatcherConditionReady)
}

func TestConfigMapFollowsTheWatcher(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	w := newWatcher(ns, "logs")
	w.Spec.ConfigBinaryData = map[string][]byte{"blob": {1, 2, 3}}
	if err := suite.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	cm := testenv.WaitFor(t, suite.Client, ns, "logs-config", &corev1.ConfigMap{}, nil)
	if !metav1.IsControlledBy(cm, w) || cm.Labels[names.ManagedByLabel] != names.ManagedByValue {
		t.Errorf("ConfigMap not controlled or not labelled: %v %v", cm.OwnerReferences, cm.Labels)
	}
	if cm.Data["LEVEL"] != "debug" || string(cm.BinaryData["blob"]) != "\x01\x02\x03" {
		t.Errorf("data %v, binaryData %v", cm.Data, cm.BinaryData)
	}
	got := testenv.WaitFor(t, suite.Client, ns, "logs", &watchv1alpha1.Watcher{}, readyWatcher)
	if got.Status.ConfigMapName != "logs-config" {
		t.Errorf("status.configMapName = %q", got.Status.ConfigMapName)
	}

	// A spec change reaches the ConfigMap. A merge patch, as kubectl patch
	// sends: an update would conflict with a status the operator writes
	// meanwhile.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.ConfigData = map[string]string{"LEVEL": "info", "NEW": "1"}
	if err := suite.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "logs-config", &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) bool {
		return cm.Data["LEVEL"] == "info" && cm.Data["NEW"] == "1"
	})

	// A hand edit is put back; a label someone added stays.
	cm = testenv.WaitFor(t, suite.Client, ns, "logs-config", &corev1.ConfigMap{}, nil)
	cmPatch := client.MergeFrom(cm.DeepCopy())
	cm.Data["LEVEL"] = "hacked"
	cm.Labels["team"] = "x"
	if err := suite.Client.Patch(ctx, cm, cmPatch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "logs-config", &corev1.ConfigMap{}, func(cm *corev1.ConfigMap) bool {
		return cm.Data["LEVEL"] == "info" && cm.Labels["team"] == "x"
	})

	// The first ConfigMap is told of by the status; one made again by an event.
	suite.CreatedAgain(t, w, cm, `Normal Created Created ConfigMap "logs-config"`)
}

func TestForeignConfigMapIsNotTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "taken-config", Namespace: ns},
		Data:       map[string]string{"mine": "yes"},
	}
	if err := suite.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := suite.Client.Create(ctx, newWatcher(ns, "taken")); err != nil {
		t.Fatal(err)
	}
	got := testenv.WaitFor(t, suite.Client, ns, "taken", &watchv1alpha1.Watcher{}, func(w *watchv1alpha1.Watcher) bool {
		return conditions.IsTrue(w.Status.Conditions, watchv1alpha1.WatcherConditionDegraded)
	})
	if c := testenv.Condition(got, watchv1alpha1.WatcherConditionDegraded); c.Reason != watchv1alpha1.WatcherReasonErrResourceExists ||
		!strings.Contains(c.Message, `"taken-config"`) || got.Status.ConfigMapName != "" || conditions.IsTrue(got.Status.Conditions, watchv1alpha1.WatcherConditionReady) {
		t.Errorf("status %+v", got.Status)
	}
	suite.WaitEvent(t, ns, "taken", `Warning ErrResourceExists ConfigMap "taken-config" already exists and is not managed by Watcher "taken"`)
	cm := &corev1.ConfigMap{}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(foreign), cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.OwnerReferences) != 0 || cm.Data["mine"] != "yes" || len(cm.Data) != 1 {
		t.Errorf("the foreign ConfigMap was changed: %v %v", cm.OwnerReferences, cm.Data)
	}
}

func TestSettledReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	w := newWatcher(ns, "settled")
	if err := suite.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "settled", &watchv1alpha1.Watcher{}, readyWatcher)
	suite.ExpectNoWrites(t, ControllerName, w, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w)})
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*watchv1alpha1.Watcher)
		field  string
	}{
		{"no-image", func(w *watchv1alpha1.Watcher) { w.Spec.Container.Image = "" }, "spec.container.image"},
		{"no-container-name", func(w *watchv1alpha1.Watcher) { w.Spec.Container.Name = "" }, "spec.container.name"},
		{"bad-key", func(w *watchv1alpha1.Watcher) { w.Spec.ConfigData = map[string]string{"a b": "x"} }, "spec.configData"},
		{"bad-binary-key", func(w *watchv1alpha1.Watcher) { w.Spec.ConfigBinaryData = map[string][]byte{"a/b": {1}} }, "spec.configBinaryData"},
		{"shared-key", func(w *watchv1alpha1.Watcher) {
			w.Spec.ConfigData = map[string]string{"k": "x"}
			w.Spec.ConfigBinaryData = map[string][]byte{"k": {1}}
		}, "spec.configData and spec.configBinaryData"},
		{strings.Repeat("n", 247), func(*watchv1alpha1.Watcher) {}, "metadata.name"},
	}
	for _, tt := range tests {
		w := newWatcher(ns, tt.name)
		tt.mutate(w)
		err := suite.Client.Create(ctx, w)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%.20s: create = %v, want an error naming %s", tt.name, err, tt.field)
		}
	}
	// Without volume and imagePullSecrets, a Watcher is valid.
	if err := suite.Client.Create(ctx, newWatcher(ns, "minimal")); err != nil {
		t.Errorf("a minimal Watcher was refused: %v", err)
	}
}

// A ConfigMap the API server refuses (an admission policy here; a quota
// alike) is reported as Degraded, retried with backoff, and created once
// admitted.
func TestRefusedConfigMapIsDegraded(t *testing.T) {
	ns := suite.Namespace(t)
	testenv.TestRefusal(t, &suite, testenv.Refusal[*watchv1alpha1.Watcher]{
		Controller: ControllerName,
		Object:     newWatcher(ns, "refused"),
		Probe:      testenv.ConfigMapProbe(ns),
		Resource:   "configmaps",
		Change:     func(w *watchv1alpha1.Watcher) { w.Spec.ConfigData["LEVEL"] = "info" },
		Recovered: func(w *watchv1alpha1.Watcher) bool {
			return conditions.IsTrue(w.Status.Conditions, watchv1alpha1.WatcherConditionReady) && w.Status.ConfigMapName == "refused-config"
		},
	})
}
