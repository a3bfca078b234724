package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FooBarSpec is the command a FooBar runs, and its environment.
type FooBarSpec struct {
	// Foo is passed to the command as the environment variable FOO.
	// +optional
	Foo string `json:"foo,omitempty"`

	// Barz is passed to the command as the environment variable BARZ.
	// +optional
	Barz string `json:"barz,omitempty"`

	// Command is a shell command, run once as `sh -c <command>`.
	// +required
	// +kubebuilder:validation:MinLength=1
	Command string `json:"command"`

	// Image is the container image the command runs in; it must have sh.
	// +optional
	// +kubebuilder:default=busybox
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self == self.trim()",message="must not have leading or trailing whitespace"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(?:(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:[.](?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|[[][a-fA-F0-9:]+[]])(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(?:@(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$') && !self.matches('^[a-f0-9]{64}$')",message="must be an image reference the kubelet can pull: [registry[:port]/]repository[:tag][@digest], such as envoyproxy/envoy:v1.40.0 or registry.example.com/team/image@sha256:<64 hex digits>; the repository in lower case"
	// +kubebuilder:validation:XValidation:rule="size(self.split('@')[0].lastIndexOf(':') > self.split('@')[0].lastIndexOf('/') ? self.split('@')[0].substring(0, self.split('@')[0].lastIndexOf(':')) : self.split('@')[0]) <= 255",message="the image's repository name (registry and path) must be at most 255 characters"
	Image string `json:"image,omitempty"`
}

// FooBarPhase is where a FooBar's run is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type FooBarPhase string

// The phases of a FooBar's run.
const (
	PhasePending   FooBarPhase = "Pending"
	PhaseRunning   FooBarPhase = "Running"
	PhaseSucceeded FooBarPhase = "Succeeded"
	PhaseFailed    FooBarPhase = "Failed"
)

// FooBarStatus is the observed state of a FooBar's run.
type FooBarStatus struct {
	// JobName is the Job that runs the command of the current generation.
	// +optional
	JobName string `json:"jobName,omitempty"`

	// Phase is Pending until the Job has a pod, then Running, then Succeeded or Failed.
	// +optional
	Phase FooBarPhase `json:"phase,omitempty"`

	// StartTime is when the Job started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the Job succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// StartedJob is the Job created for the run of the current generation. It
	// is recorded before the Job is created, and once recorded that Job is
	// never created again: if it disappears before its outcome is known, the
	// run is reported as lost (phase Failed, Complete reason JobLost) rather
	// than run a second time. A new generation runs in a new Job.
	// +optional
	StartedJob string `json:"startedJob,omitempty"`

	// ObservedGeneration is the generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Complete (True once the run ended, its reason the phase, or
	// JobLost when its Job disappeared before its outcome was known) and
	// Degraded (True when the Job cannot be created).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FooBar runs spec.command once, as a Job, with FOO and BARZ from its spec. A
// new generation of the spec runs the command again in a new Job.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=fb,categories=kec
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be no more than 52 characters: the Job's name adds the generation to it"
// +kubebuilder:printcolumn:name="Command",type=string,JSONPath=`.spec.command`
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.jobName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`,description="The Complete condition: the run has ended, its reason the phase"
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`,description="The Degraded condition: the Job cannot be created"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FooBar struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FooBarSpec   `json:"spec"`
	Status FooBarStatus `json:"status,omitempty"`
}

// FooBarList is a list of FooBars.
// +kubebuilder:object:root=true
type FooBarList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FooBar `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&FooBar{}, &FooBarList{}))
}

// GetConditions returns the status conditions.
func (o *FooBar) GetConditions() []metav1.Condition { return o.Status.Conditions }
