// Package watcher is the Watcher controller: each Watcher owns a ConfigMap,
// <name>-config, with its configData and configBinaryData, which the
// sidecar it injects takes its environment from. The injection itself is the
// mutating admission webhook's (internal/webhook/inject).
//
// render.go holds the pure part: the ConfigMap a Watcher wants and the status
// it reports. controller.go reads, compares, writes and reports.
package watcher

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
)

// Labels the operator sets on a Watcher's ConfigMap.
const (
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
)

// ConfigMap returns the ConfigMap that w wants, with its controller
// ownerReference set.
func ConfigMap(w *watchv1alpha1.Watcher) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      w.ConfigMapName(),
			Namespace: w.Namespace,
			Labels: map[string]string{
				NameLabel:            "watcher",
				InstanceLabel:        w.Name,
				names.ManagedByLabel: names.ManagedByValue,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(w, watchv1alpha1.GroupVersion.WithKind("Watcher"))},
		},
		Data:       maps.Clone(w.Spec.ConfigData),
		BinaryData: maps.Clone(w.Spec.ConfigBinaryData),
	}
}

// Observed is what the controller found, for computing status.
type Observed struct {
	// Problem is why the Watcher is Degraded, or nil: a failed write, or its
	// ConfigMap's name taken by a foreign object.
	Problem *conditions.Problem
}

// Status returns the status w should have, given what was observed. The
// conditions start from w's current ones, so a condition that did not change
// keeps its lastTransitionTime.
func Status(w *watchv1alpha1.Watcher, obs Observed) watchv1alpha1.WatcherStatus {
	st := watchv1alpha1.WatcherStatus{
		ObservedGeneration: w.Generation,
		Conditions:         append([]metav1.Condition(nil), w.Status.Conditions...),
	}
	conditions.SetDegraded(&st.Conditions, w.Generation, obs.Problem)
	if p := obs.Problem; p != nil {
		conditions.Set(&st.Conditions, w.Generation, watchv1alpha1.WatcherConditionReady, metav1.ConditionFalse, p.Reason, p.Message)
		return st
	}
	st.ConfigMapName = w.ConfigMapName()
	conditions.Set(&st.Conditions, w.Generation, watchv1alpha1.WatcherConditionReady, metav1.ConditionTrue, watchv1alpha1.WatcherReasonConfigMapReady,
		fmt.Sprintf("ConfigMap %q holds the Watcher's configuration", st.ConfigMapName))
	return st
}
