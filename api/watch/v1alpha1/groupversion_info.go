// Package v1alpha1 contains the watch.my.domain/v1alpha1 API: Watcher, a
// sidecar that the operator's mutating admission webhook injects into pods.
// +kubebuilder:object:generate=true
// +groupName=watch.my.domain
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "watch.my.domain", Version: "v1alpha1"}

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
