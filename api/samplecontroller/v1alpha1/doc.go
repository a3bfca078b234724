// The generators of k8s.io/code-generator read the package markers
// (+groupName) only from a file named doc.go.

// Package v1alpha1 contains the samplecontroller.k8s.io/v1alpha1 API: Foo,
// the custom resource of kubernetes/sample-controller.
// +kubebuilder:object:generate=true
// +groupName=samplecontroller.k8s.io
package v1alpha1
