// Package v1 contains the example.com/v1 API: Envoy, a managed fleet of Envoy
// proxies.
// +kubebuilder:object:generate=true
// +groupName=example.com
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "example.com", Version: "v1"}

	// SchemeBuilder registers the types of this API with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
