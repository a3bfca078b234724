// Package podset is the PodSet controller: a PodSet keeps spec.replicas pods
// running, as a ReplicaSet does, with the ReplicaSet controller's safeguards:
// expectations, so that no pod is created beyond spec.replicas even when the
// informer lags, slow-start batches of creates, and a scale-down that deletes
// the least useful pods first.
//
// render.go holds the pure part: the pod a PodSet wants, which pods count,
// which go first on a scale-down, and the status a PodSet reports.
// controller.go reads, compares, writes and reports.
package podset

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// The pod a PodSet without spec.template runs.
const (
	DefaultContainer = "busybox"
	DefaultImage     = "busybox"
)

// DefaultCommand is what the default container runs.
var DefaultCommand = []string{"sleep", "3600"}

// PodSetLabel is set on every pod of a PodSet, to the PodSet's name. It makes
// up the PodSet's selector, which the scale subresource reports; which pods a
// PodSet owns is decided by their controller ownerReference alone.
const PodSetLabel = "demo.k8s.io/podset"

// PodLabels are the labels a PodSet sets on its pods, over the template's.
func PodLabels(ps *demov1alpha1.PodSet) map[string]string {
	return map[string]string{PodSetLabel: ps.Name}
}

// Selector is the label selector of a PodSet's pods, as the scale subresource shows it.
func Selector(ps *demov1alpha1.PodSet) string {
	return labels.SelectorFromSet(PodLabels(ps)).String()
}

// Pod returns a new pod of ps: its template (or the default busybox pod) with
// a generated name, ps's labels and the managed-by label, and a controller
// ownerReference to ps.
func Pod(ps *demov1alpha1.PodSet) *corev1.Pod {
	var tmpl corev1.PodTemplateSpec
	if ps.Spec.Template != nil {
		ps.Spec.Template.DeepCopyInto(&tmpl)
	} else {
		tmpl.Spec.Containers = []corev1.Container{{
			Name:    DefaultContainer,
			Image:   DefaultImage,
			Command: append([]string(nil), DefaultCommand...),
		}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ps.Name + "-",
			Namespace:    ps.Namespace,
			Labels: objects.MergeMaps(tmpl.Labels, objects.MergeMaps(PodLabels(ps),
				map[string]string{names.ManagedByLabel: names.ManagedByValue})),
			Annotations:     tmpl.Annotations,
			Finalizers:      tmpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ps, demov1alpha1.GroupVersion.WithKind("PodSet"))},
		},
		Spec: tmpl.Spec,
	}
}

// IsActive reports whether pod counts towards its PodSet's replicas: it is not
// being deleted and has not finished. A finished pod is replaced.
func IsActive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !IsFinished(pod)
}

// IsFinished reports whether pod has Succeeded or Failed: it will not run again.
func IsFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// IsReady reports whether pod is running and its Ready condition is True.
func IsReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Partition splits pods into the active ones and the finished ones that should be
// removed; pods already being deleted are in neither.
func Partition(pods []*corev1.Pod) (active, finished []*corev1.Pod) {
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
		case IsFinished(p):
			finished = append(finished, p)
		default:
			active = append(active, p)
		}
	}
	return active, finished
}

// PodsToDelete returns the n active pods a scale-down removes first: pods not
// yet scheduled to a node, then Pending pods, then pods that are not ready,
// then the newest. It does not modify pods.
func PodsToDelete(pods []*corev1.Pod, n int) []*corev1.Pod {
	if n <= 0 {
		return nil
	}
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool { return deleteBefore(sorted[i], sorted[j]) })
	return sorted[:min(n, len(sorted))]
}

// deleteBefore reports whether a goes before b on a scale-down.
func deleteBefore(a, b *corev1.Pod) bool {
	if sa, sb := a.Spec.NodeName != "", b.Spec.NodeName != ""; sa != sb {
		return !sa // unscheduled first
	}
	if pa, pb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); pa != pb {
		return pa < pb
	}
	if ra, rb := IsReady(a), IsReady(b); ra != rb {
		return !ra // not ready first
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp) // newest first
	}
	return a.Name > b.Name
}

// phaseRank orders phases for deletion: Pending first, then Unknown, then Running.
func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending, "":
		return 0
	case corev1.PodUnknown:
		return 1
	default:
		return 2
	}
}

// WithoutGeneratedName returns msg, the API server's message about a pod
// whose name it generated from prefix, with that name written as prefix and
// "*": each create gets a name of its own, and a message that names it would
// change with every retry.
func WithoutGeneratedName(msg, name, prefix string) string {
	if prefix == "" || name == prefix || !strings.HasPrefix(name, prefix) {
		return msg
	}
	return strings.ReplaceAll(msg, `"`+name+`"`, `"`+prefix+`*"`)
}

// Failure is a create or delete that failed in this reconcile.
type Failure struct {
	Reason  string // demov1alpha1.PodSetReasonFailedCreate or demov1alpha1.PodSetReasonFailedDelete
	Message string
	// APIReason is the API server's reason for refusing the write
	// (conditions.FromError): Forbidden for a quota or an admission, say.
	APIReason string
}

// Observed is what the controller found and did, for computing status.
type Observed struct {
	// Active are the PodSet's pods that count towards its replicas, as the
	// cache showed them before this reconcile's creates and deletes.
	Active []*corev1.Pod
	// Managed is set when this reconcile compared the pods with spec.replicas
	// (their expectations were satisfied). Only then is Failure meaningful.
	Managed bool
	// Failure is the create or delete that failed, or nil.
	Failure *Failure
}

// Status returns the status ps should have, given what was observed. The
// conditions start from ps's current ones, so a condition that did not change
// keeps its lastTransitionTime.
func Status(ps *demov1alpha1.PodSet, obs Observed) demov1alpha1.PodSetStatus {
	st := demov1alpha1.PodSetStatus{
		Replicas:           int32(len(obs.Active)),
		ObservedGeneration: ps.Generation,
		Selector:           Selector(ps),
		Conditions:         append([]metav1.Condition(nil), ps.Status.Conditions...),
	}
	for _, p := range obs.Active {
		if IsReady(p) {
			st.ReadyReplicas++
		}
	}
	st.AvailableReplicas = st.ReadyReplicas

	want := ps.Spec.Replicas
	msg := fmt.Sprintf("%d of %d pods ready", st.AvailableReplicas, want)
	if st.AvailableReplicas >= want {
		conditions.Set(&st.Conditions, ps.Generation, demov1alpha1.PodSetConditionAvailable, metav1.ConditionTrue, demov1alpha1.PodSetReasonMinimumReplicasAvailable, msg)
	} else {
		conditions.Set(&st.Conditions, ps.Generation, demov1alpha1.PodSetConditionAvailable, metav1.ConditionFalse, demov1alpha1.PodSetReasonMinimumReplicasUnavailable, msg)
	}
	// ReplicaFailure as a ReplicaSet reports it; Degraded, with the API
	// server's reason, as every kind of the operator does.
	if obs.Managed {
		if f := obs.Failure; f != nil {
			conditions.Set(&st.Conditions, ps.Generation, demov1alpha1.PodSetConditionReplicaFailure, metav1.ConditionTrue, f.Reason, f.Message)
			conditions.SetDegraded(&st.Conditions, ps.Generation, &conditions.Problem{Reason: f.APIReason, Message: f.Message})
		} else {
			meta.RemoveStatusCondition(&st.Conditions, demov1alpha1.PodSetConditionReplicaFailure)
			conditions.SetDegraded(&st.Conditions, ps.Generation, nil)
		}
	}
	return st
}
