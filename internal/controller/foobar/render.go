// Package foobar is the FooBar controller: a FooBar runs its command once, as
// a Job. Each generation of its spec runs in its own Job; the Job of the
// previous generation is deleted with its pods.
//
// render.go holds the pure part: the Job a FooBar wants and the status a
// FooBar reports. controller.go reads, compares, writes and reports.
package foobar

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// DefaultImage runs the command when spec.image is empty.
const DefaultImage = "busybox"

// Container is the name of the container that runs the command.
const Container = "foobar"

// FooBarLabel is set on a FooBar's Jobs and their pods, to the FooBar's name.
const FooBarLabel = "k8s.io/foobar"

// Condition types and reasons a FooBar reports.
const (
	ConditionComplete = "Complete"
	ConditionDegraded = "Degraded"

	ReasonAsExpected      = "AsExpected"
	ReasonResourceExists  = "ErrResourceExists"
	MessageResourceExists = "Resource %q already exists and is not managed by FooBar"
)

// JobName is the name of the Job that runs the command of fb's current generation.
func JobName(fb *k8sv1.FooBar) string {
	return fmt.Sprintf("%s-%d", fb.Name, fb.Generation)
}

// Image is the image the command runs in.
func Image(fb *k8sv1.FooBar) string {
	if fb.Spec.Image == "" {
		return DefaultImage
	}
	return fb.Spec.Image
}

// Job returns the Job that runs fb's command once: `sh -c <command>` with FOO
// and BARZ from the spec, no retry, and a controller ownerReference to fb.
func Job(fb *k8sv1.FooBar) *batchv1.Job {
	podLabels := map[string]string{FooBarLabel: fb.Name}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(fb),
			Namespace:       fb.Namespace,
			Labels:          objects.MergeMaps(podLabels, map[string]string{objects.ManagedByLabel: objects.ManagedByValue}),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(fb, k8sv1.GroupVersion.WithKind("FooBar"))},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:    Container,
						Image:   Image(fb),
						Command: []string{"sh", "-c", fb.Spec.Command},
						Env: []corev1.EnvVar{
							{Name: "FOO", Value: fb.Spec.Foo},
							{Name: "BARZ", Value: fb.Spec.Barz},
						},
					}},
				},
			},
		},
	}
}

// IsFinished reports whether phase is the end of a run.
func IsFinished(phase k8sv1.FooBarPhase) bool {
	return phase == k8sv1.PhaseSucceeded || phase == k8sv1.PhaseFailed
}

// Finished reports whether fb's current generation has already run to its end:
// its status says so. Its Job is then not created again, even if it was deleted.
func Finished(fb *k8sv1.FooBar) bool {
	return fb.Status.ObservedGeneration == fb.Generation && fb.Status.JobName == JobName(fb) && IsFinished(fb.Status.Phase)
}

// Observed is what the controller found, for computing status.
type Observed struct {
	// Job is the Job of the current generation, or nil if there is none.
	Job *batchv1.Job
	// Clash is set when a Job of that name exists and is not controlled by the FooBar.
	Clash bool
}

// JobPhase returns the phase of a run from its Job, with the times it started
// and ended. A Job that exists but has no pod yet is Pending.
func JobPhase(job *batchv1.Job) (phase k8sv1.FooBarPhase, start, completion *metav1.Time, message string) {
	if job == nil {
		return k8sv1.PhasePending, nil, nil, "the Job does not exist yet"
	}
	start = job.Status.StartTime
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			completion = job.Status.CompletionTime
			if completion == nil {
				completion = c.LastTransitionTime.DeepCopy()
			}
			return k8sv1.PhaseSucceeded, start, completion, fmt.Sprintf("Job %q succeeded", job.Name)
		case batchv1.JobFailed:
			msg := fmt.Sprintf("Job %q failed", job.Name)
			if c.Message != "" {
				msg += ": " + c.Message
			}
			return k8sv1.PhaseFailed, start, c.LastTransitionTime.DeepCopy(), msg
		}
	}
	if job.Status.Active > 0 {
		return k8sv1.PhaseRunning, start, nil, fmt.Sprintf("Job %q is running", job.Name)
	}
	return k8sv1.PhasePending, start, nil, fmt.Sprintf("Job %q has no running pod yet", job.Name)
}

// Status returns the status fb should have, given what was observed. The
// conditions start from fb's current ones, so a condition that did not change
// keeps its lastTransitionTime. A generation that already finished keeps its
// status when its Job is gone.
func Status(fb *k8sv1.FooBar, obs Observed) k8sv1.FooBarStatus {
	if obs.Job == nil && !obs.Clash && Finished(fb) {
		return *fb.Status.DeepCopy()
	}
	st := k8sv1.FooBarStatus{
		JobName:            JobName(fb),
		ObservedGeneration: fb.Generation,
		Conditions:         append([]metav1.Condition(nil), fb.Status.Conditions...),
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: fb.Generation,
		})
	}
	if obs.Clash {
		msg := fmt.Sprintf(MessageResourceExists, st.JobName)
		st.Phase = k8sv1.PhasePending
		set(ConditionDegraded, metav1.ConditionTrue, ReasonResourceExists, msg)
		set(ConditionComplete, metav1.ConditionFalse, string(k8sv1.PhasePending), msg)
		return st
	}
	var msg string
	st.Phase, st.StartTime, st.CompletionTime, msg = JobPhase(obs.Job)
	set(ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
	if IsFinished(st.Phase) {
		set(ConditionComplete, metav1.ConditionTrue, string(st.Phase), msg)
	} else {
		set(ConditionComplete, metav1.ConditionFalse, string(st.Phase), msg)
	}
	return st
}
