// Package v1alpha1 contains the demo.k8s.io/v1alpha1 API: PodSet, a set of
// identical pods kept at a replica count, as a ReplicaSet does.
// +kubebuilder:object:generate=true
// +groupName=demo.k8s.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "demo.k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this API with a scheme. The API
	// depends on apimachinery only, so that other projects can import it.
	SchemeBuilder runtime.SchemeBuilder

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes returns the registration of objs under GroupVersion.
func knownTypes(objs ...runtime.Object) func(*runtime.Scheme) error {
	return func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	}
}
