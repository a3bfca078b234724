// The generators of k8s.io/code-generator read the package markers
// (+groupName) only from a file named doc.go.

// Package v1alpha1 contains the watch.my.domain/v1alpha1 API: Watcher, a
// sidecar that the operator's mutating admission webhook injects into pods.
// +kubebuilder:object:generate=true
// +groupName=watch.my.domain
package v1alpha1
