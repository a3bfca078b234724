// Package v1 contains the k8s.io/v1 API: FooBar, a command run once as a Job.
// +kubebuilder:object:generate=true
// +groupName=k8s.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "k8s.io", Version: "v1"}

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
