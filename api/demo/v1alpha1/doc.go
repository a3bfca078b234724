// The generators of k8s.io/code-generator read the package markers
// (+groupName) only from a file named doc.go.

// Package v1alpha1 contains the demo.k8s.io/v1alpha1 API: PodSet, a set of
// identical pods kept at a replica count, as a ReplicaSet does.
// +kubebuilder:object:generate=true
// +groupName=demo.k8s.io
package v1alpha1
