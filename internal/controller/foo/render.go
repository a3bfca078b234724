// Package foo is the Foo controller: the behaviour of kubernetes/sample-controller.
// A Foo owns one nginx Deployment named spec.deploymentName.
//
// render.go holds the pure part: the Deployment a Foo wants and the status a
// Foo reports. controller.go reads, compares, writes and reports.
package foo

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// Image is the container image of every Foo's pods.
const Image = "nginx:latest"

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
			Labels:          objects.MergeMaps(podLabels, map[string]string{names.ManagedByLabel: names.ManagedByValue}),
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
	// Deployment is the Foo's own Deployment as last seen, or nil.
	Deployment *appsv1.Deployment
	// Problem is why the Foo is Degraded, or nil: a failed write, or its
	// Deployment's name taken by a foreign object.
	Problem *conditions.Problem
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
	if obs.Deployment != nil {
		st.AvailableReplicas = obs.Deployment.Status.AvailableReplicas
	}
	conditions.SetDegraded(&st.Conditions, foo.Generation, obs.Problem)
	conditions.SetFromDeployment(&st.Conditions, foo.Generation, foo.Spec.DeploymentName, obs.Deployment, Replicas(foo), "replicas", obs.Problem)
	return st
}
