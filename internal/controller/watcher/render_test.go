package watcher

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/vocabulary"
)

func sample() *watchv1alpha1.Watcher {
	return &watchv1alpha1.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "logs", Namespace: "ns", UID: "uid-1", Generation: 4},
		Spec: watchv1alpha1.WatcherSpec{
			ConfigData:       map[string]string{"LEVEL": "debug"},
			ConfigBinaryData: map[string][]byte{"blob": {0, 1}},
		},
	}
}

func TestConfigMap(t *testing.T) {
	w := sample()
	cm := ConfigMap(w)
	if cm.Name != "logs-config" || cm.Namespace != "ns" {
		t.Errorf("name %s/%s", cm.Namespace, cm.Name)
	}
	if !metav1.IsControlledBy(cm, w) {
		t.Error("no controller reference to the Watcher")
	}
	if cm.Labels[names.ManagedByLabel] != names.ManagedByValue || cm.Labels[InstanceLabel] != "logs" {
		t.Errorf("labels %v", cm.Labels)
	}
	if cm.Data["LEVEL"] != "debug" || string(cm.BinaryData["blob"]) != "\x00\x01" {
		t.Errorf("data %v, binaryData %v", cm.Data, cm.BinaryData)
	}
	// The ConfigMap does not share its maps with the Watcher.
	cm.Data["LEVEL"] = "x"
	if w.Spec.ConfigData["LEVEL"] != "debug" {
		t.Error("ConfigMap aliases the Watcher's configData")
	}
}

func TestStatus(t *testing.T) {
	w := sample()
	st := Status(w, Observed{})
	ready := meta.FindStatusCondition(st.Conditions, watchv1alpha1.WatcherConditionReady)
	degraded := meta.FindStatusCondition(st.Conditions, watchv1alpha1.WatcherConditionDegraded)
	if st.ConfigMapName != "logs-config" || st.ObservedGeneration != 4 ||
		ready == nil || ready.Status != metav1.ConditionTrue || degraded == nil || degraded.Status != metav1.ConditionFalse {
		t.Errorf("status %+v", st)
	}

	w.Status = st
	clash := Status(w, Observed{Problem: &conditions.Problem{Reason: watchv1alpha1.WatcherReasonErrResourceExists, Message: "taken"}})
	vocabulary.Check(t, w, append(st.Conditions, clash.Conditions...))
	degraded = meta.FindStatusCondition(clash.Conditions, watchv1alpha1.WatcherConditionDegraded)
	ready = meta.FindStatusCondition(clash.Conditions, watchv1alpha1.WatcherConditionReady)
	if clash.ConfigMapName != "" || degraded.Status != metav1.ConditionTrue || degraded.Reason != watchv1alpha1.WatcherReasonErrResourceExists ||
		ready.Status != metav1.ConditionFalse || ready.Reason != watchv1alpha1.WatcherReasonErrResourceExists {
		t.Errorf("clash status %+v", clash)
	}
	w.Status = clash
	if again := Status(w, Observed{}); again.ConfigMapName != "logs-config" || !conditions.IsTrue(again.Conditions, watchv1alpha1.WatcherConditionReady) {
		t.Errorf("once the clash is gone: %+v", again)
	}
}
