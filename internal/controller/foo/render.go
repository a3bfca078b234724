// Package foo is the Foo controller: the behaviour of kubernetes/sample-controller.
// A Foo owns one nginx Deployment named spec.deploymentName.
//
// render.go holds the pure part: the Deployment a Foo wants and the status a
// Foo reports. controller.go reads, compares, writes and reports.
package foo

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// Image is the container image of every Foo's pods.
const Image = "nginx:latest"

// Condition types and reasons a Foo reports.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"

	ReasonResourceExists   = "ErrResourceExists"
	ReasonAvailable        = "MinimumReplicasAvailable"
	ReasonUnavailable      = "MinimumReplicasUnavailable"
	ReasonRollingOut       = "RollingOut"
	ReasonRolledOut        = "RolledOut"
	ReasonAsExpected       = "AsExpected"
	ReasonNoDeployment     = "DeploymentMissing"
	MessageResourceExists  = "Resource %q already exists and is not managed by Foo"
	MessageDeploymentReady = "Deployment %q has %d of %d replicas available"
)

// PodLabels are the labels of a Foo's pods and its Deployment's selector.
func PodLabels(foo *samplev1alpha1.Foo) map[string]string {
	return map[string]string{"app": "nginx", "controller": foo.Name}
}

// Replicas is the Foo's desired replica count, with the API's default.
func Replicas(foo *samplev1alpha1.Foo) int32 {
	return ptr.Deref(foo.Spec.Replicas, 1)
}

// Deployment returns the Deployment that foo wants, with its controller
// ownerReference set.
func Deployment(foo *samplev1alpha1.Foo) *appsv1.Deployment {
	podLabels := PodLabels(foo)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            foo.Spec.DeploymentName,
			Namespace:       foo.Namespace,
			Labels:          objects.MergeMaps(podLabels, map[string]string{objects.ManagedByLabel: objects.ManagedByValue}),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foo, samplev1alpha1.GroupVersion.WithKind("Foo"))},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(Replicas(foo)),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: Image}},
				},
			},
		},
	}
}

// Observed is what the controller found, for computing status.
type Observed struct {
	// Deployment is the Foo's own Deployment, or nil if there is none.
	Deployment *appsv1.Deployment
	// Clash is set when a Deployment named spec.deploymentName exists and is not
	// controlled by the Foo.
	Clash bool
}

// Status returns the status foo should have, given what was observed. The
// conditions start from foo's current ones, so a condition that did not change
// keeps its lastTransitionTime.
func Status(foo *samplev1alpha1.Foo, obs Observed) samplev1alpha1.FooStatus {
	st := samplev1alpha1.FooStatus{
		ObservedGeneration: foo.Generation,
		Selector:           labels.SelectorFromSet(PodLabels(foo)).String(),
		Conditions:         append([]metav1.Condition(nil), foo.Status.Conditions...),
	}
	want := Replicas(foo)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: foo.Generation,
		})
	}

	switch {
	case obs.Clash:
		msg := fmt.Sprintf(MessageResourceExists, foo.Spec.DeploymentName)
		set(ConditionDegraded, metav1.ConditionTrue, ReasonResourceExists, msg)
		set(ConditionAvailable, metav1.ConditionFalse, ReasonResourceExists, msg)
		set(ConditionProgressing, metav1.ConditionFalse, ReasonResourceExists, msg)
		return st
	case obs.Deployment == nil:
		msg := fmt.Sprintf("Deployment %q does not exist yet", foo.Spec.DeploymentName)
		set(ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
		set(ConditionAvailable, metav1.ConditionFalse, ReasonNoDeployment, msg)
		set(ConditionProgressing, metav1.ConditionTrue, ReasonNoDeployment, msg)
		return st
	}

	d := obs.Deployment
	st.AvailableReplicas = d.Status.AvailableReplicas
	set(ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
	msg := fmt.Sprintf(MessageDeploymentReady, d.Name, d.Status.AvailableReplicas, want)
	if d.Status.AvailableReplicas >= want {
		set(ConditionAvailable, metav1.ConditionTrue, ReasonAvailable, msg)
	} else {
		set(ConditionAvailable, metav1.ConditionFalse, ReasonUnavailable, msg)
	}
	if rolledOut(d, want) {
		set(ConditionProgressing, metav1.ConditionFalse, ReasonRolledOut, fmt.Sprintf("Deployment %q is rolled out", d.Name))
	} else {
		set(ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, fmt.Sprintf("Deployment %q is rolling out", d.Name))
	}
	return st
}

// rolledOut reports whether the Deployment controller has finished rolling out
// the current template at the wanted scale, as `kubectl rollout status` judges.
func rolledOut(d *appsv1.Deployment, want int32) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}
