package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EnvoyConfigSpec is configuration for one Envoy fleet, served to its proxies
// by the operator's xDS server.
type EnvoyConfigSpec struct {
	// EnvoyRef is the name of the Envoy, in this namespace, whose proxies get
	// this configuration. It must be a name an Envoy can have.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="must be the name of an Envoy: a DNS-1123 subdomain (lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character) of at most 63 characters"
	EnvoyRef string `json:"envoyRef"`

	// Resources are raw Envoy v3 resources, written as YAML or JSON objects
	// in Envoy's own field names (for example a listener's "name",
	// "address" and "filter_chains").
	// +optional
	Resources EnvoyResources `json:"resources,omitempty"`

	// ServiceEndpoints fill EDS clusters from the ready endpoints of Services.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=256
	ServiceEndpoints []ServiceEndpoints `json:"serviceEndpoints,omitempty"`

	// TLSSecrets serve Kubernetes Secrets of this namespace to the fleet's
	// proxies over SDS, each under an SDS secret name that listeners and
	// clusters ask for (sds_config: {ads: {}}). The Secrets' keys are read
	// live and never stored in this object, its status or the fleet's
	// revision history.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	TLSSecrets []TLSSecret `json:"tlsSecrets,omitempty"`
}

// TLSSecret names a Secret whose certificate and private key the fleet's
// proxies get over SDS, as an envoy.extensions.transport_sockets.tls.v3.Secret
// with a tls_certificate from its tls.crt and tls.key. The Secret must be of
// type kubernetes.io/tls and carry the label
// kube-envoy-controller.io/xds-secret: tls, its owner's consent to have it
// served to the proxies of its namespace's fleets.
type TLSSecret struct {
	// Name is the SDS secret name the proxies ask for.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_.:/@-]+$')",message="must be an SDS secret name: letters, digits, '_', '.', ':', '/', '@' or '-'"
	Name string `json:"name"`
	// SecretRef is the name of the Secret, in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="must be the name of a Secret: a DNS-1123 subdomain (lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character)"
	SecretRef string `json:"secretRef"`
}

// EnvoyResources are lists of raw Envoy v3 resources, by type.
type EnvoyResources struct {
	// Listeners are envoy.config.listener.v3.Listener resources.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Listeners []runtime.RawExtension `json:"listeners,omitempty"`
	// Clusters are envoy.config.cluster.v3.Cluster resources.
	// +optional
	// +kubebuilder:validation:MaxItems=4096
	Clusters []runtime.RawExtension `json:"clusters,omitempty"`
	// Routes are envoy.config.route.v3.RouteConfiguration resources.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Routes []runtime.RawExtension `json:"routes,omitempty"`
	// Endpoints are envoy.config.endpoint.v3.ClusterLoadAssignment resources.
	// +optional
	// +kubebuilder:validation:MaxItems=4096
	Endpoints []runtime.RawExtension `json:"endpoints,omitempty"`
	// Secrets are envoy.extensions.transport_sockets.tls.v3.Secret resources.
	// Anyone who may read this EnvoyConfig can read them: they may hold
	// public material only, such as a validation_context's CA certificates.
	// Private keys and other secret material inline are refused; serve them
	// from a Secret with spec.tlsSecrets.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Secrets []runtime.RawExtension `json:"secrets,omitempty"`
}

// ServiceEndpoints names the Service whose ready endpoints make up an EDS
// cluster's ClusterLoadAssignment.
type ServiceEndpoints struct {
	// Cluster is the name of the EDS cluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	Cluster string `json:"cluster"`
	// Service is the name of a Service in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1035Label().validate(self).hasValue()",message="must be the name of a Service: a DNS-1035 label (lower case alphanumeric characters or '-', starting with a letter and ending with an alphanumeric character)"
	Service string `json:"service"`
	// Port is the endpoint port: the name of the Service's port, or the
	// number the pods listen on.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 65535) : !format.dns1123Label().validate(self).hasValue()",message="must be the name of a port of the Service (a DNS-1123 label) or a port number from 1 to 65535"
	Port intstr.IntOrString `json:"port"`
}

// ProxyStatus counts the fleet's proxies for the published version.
type ProxyStatus struct {
	// Connected is the number of proxies of the fleet with an open stream.
	Connected int32 `json:"connected"`
	// Acked is the number that accepted the published version.
	Acked int32 `json:"acked"`
	// Nacked is the number that rejected it.
	Nacked int32 `json:"nacked"`
	// LastNACK is the error_detail of the last rejection.
	// +optional
	LastNACK string `json:"lastNACK,omitempty"`
}

// EnvoyConfigStatus is what the operator made of an EnvoyConfig.
type EnvoyConfigStatus struct {
	// PublishedVersion is the version of the fleet's configuration that the
	// xDS server serves, a hash of its content.
	// +optional
	PublishedVersion string `json:"publishedVersion,omitempty"`
	// ContentHash is a hash of this EnvoyConfig's spec.
	// +optional
	ContentHash string `json:"contentHash,omitempty"`
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Proxies counts the fleet's proxies and their answers to the published version.
	// +optional
	Proxies ProxyStatus `json:"proxies,omitempty"`
	// RejectedVersions are versions of the fleet's configuration that every
	// connected proxy rejected while this EnvoyConfig's content was what
	// contentHash says, the most recent first. They are not published
	// again, even if the fleet's revision history is lost; they are
	// forgotten when this EnvoyConfig's content changes.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	// +listType=atomic
	RejectedVersions []string `json:"rejectedVersions,omitempty"`
	// Rollout is where the rollout of the published version stands, while it
	// rolls out across the fleet's proxies or after it was aborted (the
	// Envoy's spec.configRollout).
	// +optional
	Rollout *ConfigRolloutStatus `json:"rollout,omitempty"`
	// Conditions: Accepted, Published and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConfigRolloutStatus is where the rollout of a fleet's published version
// stands.
type ConfigRolloutStatus struct {
	// Version is the version rolled out: the published version.
	Version string `json:"version"`
	// PreviousVersion is the version the proxies outside the step are
	// served: the last one rolled out to every proxy.
	PreviousVersion string `json:"previousVersion"`
	// Phase is Progressing, or Aborted: every proxy is served
	// previousVersion until the content changes.
	// +kubebuilder:validation:Enum=Progressing;Aborted
	Phase string `json:"phase"`
	// Step is the current step, from 1.
	Step int32 `json:"step"`
	// ServedProxies of ConnectedProxies are served version.
	ServedProxies    int32 `json:"servedProxies"`
	ConnectedProxies int32 `json:"connectedProxies"`
	// Message says why the step waits, or why the rollout was aborted.
	// +optional
	Message string `json:"message,omitempty"`
}

// RolloutPromoteAnnotation, set on an Envoy to <version>/<step>, promotes
// the rollout of that version past that step without waiting for its bake
// time; its proxies must still have accepted it. RolloutAbortAnnotation,
// set to <version>, aborts that version's rollout: every proxy is served
// the previous version until the content changes. Each names what it was
// given for, so that one left in place acts once, and never on a later
// rollout. kubectl envoy rollout promote and abort set them.
const (
	RolloutPromoteAnnotation = "kube-envoy-controller.io/rollout-promote"
	RolloutAbortAnnotation   = "kube-envoy-controller.io/rollout-abort"
)

// EnvoyConfig declares listeners, routes, clusters, endpoints and secrets for
// the proxies of one Envoy fleet. The operator validates them and serves them
// over xDS; several EnvoyConfigs for one fleet are merged.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=evc,categories=kec
// +kubebuilder:printcolumn:name="Envoy",type=string,JSONPath=`.spec.envoyRef`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.publishedVersion`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`,description="The Accepted condition: every resource is valid and its references exist"
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.status.conditions[?(@.type=="Published")].status`
// +kubebuilder:printcolumn:name="Acked",type=integer,JSONPath=`.status.proxies.acked`
// +kubebuilder:printcolumn:name="Nacked",type=integer,JSONPath=`.status.proxies.nacked`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`,description="The Degraded condition: proxies rejected the configuration, a name clashes, a Secret cannot be served, or the Envoy is missing"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EnvoyConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EnvoyConfigSpec   `json:"spec"`
	Status EnvoyConfigStatus `json:"status,omitempty"`
}

// EnvoyConfigList is a list of EnvoyConfigs.
// +kubebuilder:object:root=true
type EnvoyConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EnvoyConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&EnvoyConfig{}, &EnvoyConfigList{}))
}

// GetConditions returns the status conditions.
func (o *EnvoyConfig) GetConditions() []metav1.Condition { return o.Status.Conditions }
