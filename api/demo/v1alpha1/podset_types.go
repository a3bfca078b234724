package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodSetSpec is the desired state of a PodSet.
type PodSetSpec struct {
	// Replicas is the number of pods the PodSet keeps. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`

	// Template is the pod the PodSet creates. When it is absent each pod has one
	// container "busybox" (image busybox) running `sleep 3600`. A changed
	// template applies to pods created afterwards; running pods are left alone.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.labels) || self.metadata.labels.all(k, size(k) <= 317 && k.matches('^([-a-z0-9.]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",fieldPath=".metadata.labels",message="every key must be a valid label key"
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.labels) || self.metadata.labels.all(k, size(self.metadata.labels[k]) <= 63)",fieldPath=".metadata.labels",message="every value must be a label value of at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.annotations) || self.metadata.annotations.all(k, size(k) <= 317 && k.matches('^([-A-Za-z0-9.]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",fieldPath=".metadata.annotations",message="every key must be a valid annotation key"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || self.spec.containers.all(c, size(c.name) <= 63)",fieldPath=".spec.containers",message="every container name must be a DNS-1123 label of at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.restartPolicy) || self.spec.restartPolicy in ['Always', 'OnFailure', 'Never']",fieldPath=".spec.restartPolicy",message="must be Always, OnFailure or Never"
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`
}

// PodSetStatus is the observed state of a PodSet.
type PodSetStatus struct {
	// AvailableReplicas is the number of the PodSet's pods that are ready.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`

	// Replicas is the number of the PodSet's pods that are neither terminating
	// nor finished.
	// +optional
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of the PodSet's pods whose Ready condition is True.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// ObservedGeneration is the generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Selector is the label selector of the PodSet's pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Conditions: Available; Degraded (with the API server's reason) and, as on
	// a ReplicaSet, ReplicaFailure while pods cannot be created or deleted.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PodSet keeps spec.replicas identical pods running, as a ReplicaSet does.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=ps,categories=kec
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: it is used as a label value"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`,description="The Degraded condition: True while pods cannot be created or deleted"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodSetSpec   `json:"spec"`
	Status PodSetStatus `json:"status,omitempty"`
}

// PodSetList is a list of PodSets.
// +kubebuilder:object:root=true
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&PodSet{}, &PodSetList{}))
}

// GetConditions returns the status conditions.
func (o *PodSet) GetConditions() []metav1.Condition { return o.Status.Conditions }
