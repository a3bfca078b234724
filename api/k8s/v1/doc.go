// The generators of k8s.io/code-generator read the package markers
// (+groupName) only from a file named doc.go.

// Package v1 contains the k8s.io/v1 API: FooBar, a command run once as a Job.
// +kubebuilder:object:generate=true
// +groupName=k8s.io
package v1
