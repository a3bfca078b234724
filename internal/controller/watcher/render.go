// Package watcher is the Watcher controller: each Watcher owns a ConfigMap,
// <name>-config, with its configData and configBinaryData, which the
// sidecar it injects takes its environment from. The injection itself is the
// mutating admission webhook's (internal/webhook).
//
// render.go holds the pure part: the ConfigMap a Watcher wants and the status
// it reports. controller.go reads, compares, writes and reports.
package watcher

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// Labels the operator sets on a Watcher's ConfigMap.
const (
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
)

// Condition types and reasons a Watcher reports.
const (
	ConditionReady    = "Ready"
	ConditionDegraded = "Degraded"

	ReasonResourceExists  = "ResourceExists"
	ReasonAsExpected      = "AsExpected"
	ReasonConfigMapReady  = "ConfigMapReady"
	MessageResourceExists = "ConfigMap %q already exists and is not managed by the Watcher"
)

// ConfigMapName is the name of the Watcher's ConfigMap.
func ConfigMapName(w *watchv1alpha1.Watcher) string { return w.Name + "-config" }

// ConfigMap returns the ConfigMap that w wants, with its controller
// ownerReference set.
func ConfigMap(w *watchv1alpha1.Watcher) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ConfigMapName(w),
			Namespace: w.Namespace,
			Labels: map[string]string{
				NameLabel:              "watcher",
				InstanceLabel:          w.Name,
				objects.ManagedByLabel: objects.ManagedByValue,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(w, watchv1alpha1.GroupVersion.WithKind("Watcher"))},
		},
		Data:       maps.Clone(w.Spec.ConfigData),
		BinaryData: maps.Clone(w.Spec.ConfigBinaryData),
	}
}

// Observed is what the controller found, for computing status.
type Observed struct {
	// Clash is set when a ConfigMap of the Watcher's name exists and is not
	// controlled by the Watcher.
	Clash bool
}

// Status returns the status w should have, given what was observed. The
// conditions start from w's current ones, so a condition that did not change
// keeps its lastTransitionTime.
func Status(w *watchv1alpha1.Watcher, obs Observed) watchv1alpha1.WatcherStatus {
	st := watchv1alpha1.WatcherStatus{
		ObservedGeneration: w.Generation,
		Conditions:         append([]metav1.Condition(nil), w.Status.Conditions...),
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: w.Generation,
		})
	}
	name := ConfigMapName(w)
	if obs.Clash {
		msg := fmt.Sprintf(MessageResourceExists, name)
		set(ConditionDegraded, metav1.ConditionTrue, ReasonResourceExists, msg)
		set(ConditionReady, metav1.ConditionFalse, ReasonResourceExists, msg)
		return st
	}
	st.ConfigMapName = name
	set(ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
	set(ConditionReady, metav1.ConditionTrue, ReasonConfigMapReady, fmt.Sprintf("ConfigMap %q holds the Watcher's configuration", name))
	return st
}

// Clashing reports whether w's status says that its ConfigMap name is taken
// by an object it does not control: its sidecar would take its environment
// from someone else's data.
func Clashing(w *watchv1alpha1.Watcher) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, ConditionDegraded)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonResourceExists
}
