// The generators of k8s.io/code-generator read the package markers
// (+groupName) only from a file named doc.go.

// Package v1 contains the example.com/v1 API: Envoy, a managed fleet of Envoy
// proxies.
// +kubebuilder:object:generate=true
// +groupName=example.com
package v1
