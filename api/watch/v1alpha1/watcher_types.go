package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WatcherSpec is the sidecar a Watcher injects: a container, optionally a
// volume and an image pull secret, and the data of a ConfigMap that the
// container takes its environment from.
// +kubebuilder:validation:XValidation:rule="size(self.container.name) > 0",message="spec.container.name is required"
// +kubebuilder:validation:XValidation:rule="has(self.container.image) && size(self.container.image) > 0",message="spec.container.image is required"
// +kubebuilder:validation:XValidation:rule="!has(self.configData) || !has(self.configBinaryData) || !self.configData.exists(k, k in self.configBinaryData)",message="spec.configData and spec.configBinaryData must not share a key"
// +kubebuilder:validation:XValidation:rule="!has(self.container.restartPolicy)",fieldPath=".container.restartPolicy",message="is set by the injector: set spec.nativeSidecar to inject the container as a native sidecar"
type WatcherSpec struct {
	// Container is the sidecar container added to every pod the Watcher
	// is injected into. Its environment also comes from the Watcher's
	// ConfigMap (status.configMapName).
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.name) || (size(self.name) <= 63 && self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",fieldPath=".name",message="must be a DNS-1123 label: at most 63 lower case alphanumeric characters or '-', starting and ending with an alphanumeric character"
	// +kubebuilder:validation:XValidation:rule="!has(self.image) || self.image == self.image.trim()",fieldPath=".image",message="must not have leading or trailing whitespace"
	// +kubebuilder:validation:XValidation:rule="!has(self.ports) || self.ports.all(p, p.containerPort >= 1 && p.containerPort <= 65535)",fieldPath=".ports",message="every containerPort must be between 1 and 65535"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || self.resources.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",fieldPath=".resources.requests",message="each resource name must be cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed extended resource such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || self.resources.requests.all(k, !k.contains('/') || !format.qualifiedName().validate(k).hasValue())",fieldPath=".resources.requests",message="an extended resource name must be a qualified name such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || self.resources.limits.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",fieldPath=".resources.limits",message="each resource name must be cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed extended resource such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || self.resources.limits.all(k, !k.contains('/') || !format.qualifiedName().validate(k).hasValue())",fieldPath=".resources.limits",message="an extended resource name must be a qualified name such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || ['cpu', 'memory', 'ephemeral-storage'].all(r, (!has(self.resources.requests) || !(r in self.resources.requests) || !isQuantity(string(self.resources.requests[r])) || !quantity(string(self.resources.requests[r])).isLessThan(quantity('0'))) && (!has(self.resources.limits) || !(r in self.resources.limits) || !isQuantity(string(self.resources.limits[r])) || !quantity(string(self.resources.limits[r])).isLessThan(quantity('0'))))",fieldPath=".resources",message="cpu, memory and ephemeral-storage quantities must not be negative"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !has(self.resources.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.resources.requests) || !(r in self.resources.limits) || !isQuantity(string(self.resources.requests[r])) || !isQuantity(string(self.resources.limits[r])) || !quantity(string(self.resources.limits[r])).isLessThan(quantity(string(self.resources.requests[r]))))",fieldPath=".resources",message="requests must not exceed limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.image) || self.image.matches('^([]a-zA-Z0-9.:[-]+/)?[a-z0-9]+([._/-]+[a-z0-9]+)*(:[a-zA-Z0-9_.-]+)?(@sha[0-9]+:[a-f0-9]+)?$')",fieldPath=".image",message="must be an image reference the kubelet can pull: [registry[:port]/]repository[:tag][@digest], such as envoyproxy/envoy:v1.40.0 or registry.example.com/team/image@sha256:<64 hex digits>; the repository in lower case"
	Container corev1.Container `json:"container"`

	// Volume is added to the pod along with the container.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.name) || (size(self.name) <= 63 && self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",fieldPath=".name",message="must be a DNS-1123 label: at most 63 lower case alphanumeric characters or '-', starting and ending with an alphanumeric character"
	// +kubebuilder:validation:XValidation:rule="!has(self.name) || [has(self.hostPath), has(self.emptyDir), has(self.gcePersistentDisk), has(self.awsElasticBlockStore), has(self.gitRepo), has(self.secret), has(self.nfs), has(self.iscsi), has(self.glusterfs), has(self.persistentVolumeClaim), has(self.rbd), has(self.flexVolume), has(self.cinder), has(self.cephfs), has(self.flocker), has(self.downwardAPI), has(self.fc), has(self.azureFile), has(self.configMap), has(self.vsphereVolume), has(self.quobyte), has(self.azureDisk), has(self.photonPersistentDisk), has(self.projected), has(self.portworxVolume), has(self.scaleIO), has(self.storageos), has(self.csi), has(self.ephemeral), has(self.image)].exists_one(s, s)",message="must set exactly one volume source, such as emptyDir, configMap, secret or persistentVolumeClaim"
	// +kubebuilder:validation:XValidation:rule="!has(self.configMap) || (has(self.configMap.name) && size(self.configMap.name) > 0)",fieldPath=".configMap.name",message="configMap.name is required"
	// +kubebuilder:validation:XValidation:rule="!has(self.secret) || (has(self.secret.secretName) && size(self.secret.secretName) > 0)",fieldPath=".secret.secretName",message="secret.secretName is required"
	// +kubebuilder:validation:XValidation:rule="!has(self.hostPath) || size(self.hostPath.path) > 0",fieldPath=".hostPath.path",message="hostPath.path is required"
	// +kubebuilder:validation:XValidation:rule="!has(self.persistentVolumeClaim) || size(self.persistentVolumeClaim.claimName) > 0",fieldPath=".persistentVolumeClaim.claimName",message="persistentVolumeClaim.claimName is required"
	Volume corev1.Volume `json:"volume,omitzero"`

	// ConfigData is the string data of the Watcher's ConfigMap.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$') && k != '.' && !k.startsWith('..'))",message="spec.configData keys must consist of alphanumeric characters, '-', '_' or '.', and must not be '.' or start with '..'"
	ConfigData map[string]string `json:"configData,omitempty"`

	// ConfigBinaryData is the binary data of the Watcher's ConfigMap.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$') && k != '.' && !k.startsWith('..'))",message="spec.configBinaryData keys must consist of alphanumeric characters, '-', '_' or '.', and must not be '.' or start with '..'"
	ConfigBinaryData map[string][]byte `json:"configBinaryData,omitempty"`

	// ImagePullSecrets names a Secret, in the pod's namespace, added to the
	// pod's imagePullSecrets.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.name) || self.name == '' || (size(self.name) <= 253 && self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))",fieldPath=".name",message="must be the name of a Secret: a DNS-1123 subdomain"
	ImagePullSecrets corev1.LocalObjectReference `json:"imagePullSecrets,omitzero"`

	// Selector injects the Watcher into every pod of its namespace whose
	// labels match, besides the pods that name it in their
	// watch.my.domain/inject annotation, but only where the namespace lets
	// it: its annotation watch.my.domain/selector-watchers lists the
	// Watcher's name, or is "*". When it is omitted, only the annotation
	// injects the Watcher; an empty selector matches every pod.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",fieldPath=".matchExpressions",message="every operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']) || (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",fieldPath=".matchExpressions",message="values must be set for the operators In and NotIn, and must be empty for Exists and DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, size(e.key) > 0 && size(e.key) <= 317)",fieldPath=".matchExpressions",message="every key must be a label key of 1 to 317 characters"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, size(k) <= 317 && k.matches('^([-a-z0-9.]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",fieldPath=".matchLabels",message="every key must be a valid label key"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, size(self.matchLabels[k]) <= 63)",fieldPath=".matchLabels",message="every value must be a label value of at most 63 characters"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// NativeSidecar injects the container as a native sidecar (Kubernetes
	// 1.29 and later): an init container with restartPolicy Always, placed
	// before the pod's own init containers. It starts before them and before
	// the pod's containers, and stops after the pod's containers; a Job's
	// pod completes without it. Without it, the container is added to the
	// pod's containers.
	// +optional
	NativeSidecar bool `json:"nativeSidecar,omitempty"`
}

// WatcherStatus is the observed state of a Watcher.
type WatcherStatus struct {
	// ConfigMapName is the name of the ConfigMap that holds configData and
	// configBinaryData, once the Watcher owns it.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`

	// ObservedGeneration is the generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Watcher is a sidecar that the operator's mutating admission webhook adds
// to the pods that ask for it with the annotation watch.my.domain/inject, or
// that match spec.selector, in namespaces labelled
// kube-envoy-controller.io/injection=enabled.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=wtc,categories=kec
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: it is the value of the label app.kubernetes.io/instance on the Watcher's ConfigMap"
// +kubebuilder:printcolumn:name="Container",type=string,JSONPath=`.spec.container.name`
// +kubebuilder:printcolumn:name="ConfigMap",type=string,JSONPath=`.status.configMapName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`,description="The Degraded condition: the Watcher's ConfigMap belongs to someone else"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Watcher struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WatcherSpec   `json:"spec"`
	Status WatcherStatus `json:"status,omitempty"`
}

// WatcherList is a list of Watchers.
// +kubebuilder:object:root=true
type WatcherList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Watcher `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&Watcher{}, &WatcherList{}))
}

// GetConditions returns the status conditions.
func (o *Watcher) GetConditions() []metav1.Condition { return o.Status.Conditions }

// ConfigMapName is the name of the ConfigMap that holds the Watcher's
// configData and configBinaryData, which its sidecar takes its environment
// from: <name>-config.
func (o *Watcher) ConfigMapName() string { return o.Name + "-config" }
