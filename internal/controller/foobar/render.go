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
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
)

// DefaultImage runs the command when spec.image is empty.
const DefaultImage = "busybox"

// Container is the name of the container that runs the command.
const Container = "foobar"

// FooBarLabel is set on a FooBar's Jobs and their pods, to the FooBar's name.
const FooBarLabel = "k8s.io/foobar"

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

// Step is what a reconcile does about the run of a FooBar's current generation.
type Step string

const (
	// StepStart: the run was never started. The reconcile records the start
	// in status (StartStatus), and only then creates the Job.
	StepStart Step = "Start"
	// StepFollow: the run was started. Its Job is followed, and never created
	// again: a Job that is gone was deleted (by someone, or its TTL after
	// finishing) before its outcome was recorded, and creating it again would
	// run the command twice.
	StepFollow Step = "Follow"
	// StepNone: the run ended, or was lost. Nothing runs again until the
	// next generation, even if the Job is deleted.
	StepNone Step = "None"
)

// Plan returns what a reconcile does about fb's current generation, from
// fb's status alone: the status, not the Job, is the record of a run.
func Plan(fb *k8sv1.FooBar) Step {
	switch {
	case Finished(fb):
		return StepNone
	case Started(fb):
		return StepFollow
	}
	return StepStart
}

// Started reports whether fb's status records that the Job of its current
// generation was created, or was about to be.
func Started(fb *k8sv1.FooBar) bool {
	return fb.Status.StartedJob == JobName(fb)
}

// StartStatus is the status written before the current generation's Job is
// created: Pending, with the start recorded.
func StartStatus(fb *k8sv1.FooBar) k8sv1.FooBarStatus {
	return Status(fb, Observed{Started: true})
}

// Desired returns the Job to create for fb's current generation, or nil when
// none may be: the run was started already (its Job is followed, never
// created again), or it ended.
func Desired(fb *k8sv1.FooBar) *batchv1.Job {
	if Plan(fb) != StepStart {
		return nil
	}
	return Job(fb)
}

// jobs are created once and never updated (a Job's pod template cannot
// change); their creation starts a run.
var jobs = func() objects.Child[*batchv1.Job] {
	c := objects.Jobs
	c.CreatedReason = k8sv1.FooBarEventStarted
	return c
}()

// Job returns the Job that runs fb's command once: `sh -c <command>` with FOO
// and BARZ from the spec, no retry, and a controller ownerReference to fb.
func Job(fb *k8sv1.FooBar) *batchv1.Job {
	podLabels := map[string]string{FooBarLabel: fb.Name}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(fb),
			Namespace:       fb.Namespace,
			Labels:          objects.MergeMaps(podLabels, map[string]string{names.ManagedByLabel: names.ManagedByValue}),
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
	// Started is whether the current generation's Job was created, or may
	// have been: its start is recorded, and a create that was surely refused
	// did not undo it.
	Started bool
	// Lost is whether the Job of a started run is gone (or was replaced by
	// an object fb does not control) before its outcome was recorded.
	Lost bool
	// Problem is why the FooBar is Degraded, or nil: a failed write, or its
	// Job's name taken by a foreign object.
	Problem *conditions.Problem
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
	if obs.Job == nil && obs.Problem == nil && Finished(fb) {
		return *fb.Status.DeepCopy()
	}
	st := k8sv1.FooBarStatus{
		JobName:            JobName(fb),
		ObservedGeneration: fb.Generation,
		Conditions:         append([]metav1.Condition(nil), fb.Status.Conditions...),
	}
	if obs.Started || obs.Lost {
		st.StartedJob = JobName(fb)
	}
	conditions.SetDegraded(&st.Conditions, fb.Generation, obs.Problem)
	if obs.Lost {
		// Whether the command ran, and how it ended, is unknown; running it
		// again could run it twice. The run ends here, as failed; a new
		// generation runs it again.
		st.Phase = k8sv1.PhaseFailed
		conditions.Set(&st.Conditions, fb.Generation, k8sv1.FooBarConditionComplete, metav1.ConditionTrue, k8sv1.FooBarReasonJobLost,
			fmt.Sprintf("Job %q disappeared before its outcome was known; the command of generation %d is not run again", JobName(fb), fb.Generation))
		return st
	}
	if p := obs.Problem; p != nil && obs.Job == nil {
		st.Phase = k8sv1.PhasePending
		conditions.Set(&st.Conditions, fb.Generation, k8sv1.FooBarConditionComplete, metav1.ConditionFalse, string(k8sv1.PhasePending), p.Message)
		return st
	}
	var msg string
	st.Phase, st.StartTime, st.CompletionTime, msg = JobPhase(obs.Job)
	conditions.SetBool(&st.Conditions, fb.Generation, k8sv1.FooBarConditionComplete, IsFinished(st.Phase), string(st.Phase), msg)
	return st
}

// Transitions are the events of a run, from its status: Succeeded or Failed
// when it ends.
func Transitions(before, after status.Object) []status.Event {
	was, now := before.(*k8sv1.FooBar).Status, after.(*k8sv1.FooBar).Status
	if !IsFinished(now.Phase) || (was.Phase == now.Phase && was.JobName == now.JobName) {
		return nil
	}
	if now.Phase == k8sv1.PhaseSucceeded {
		return []status.Event{{Type: corev1.EventTypeNormal, Reason: k8sv1.FooBarEventSucceeded, Action: "Run",
			Note: fmt.Sprintf("Job %q succeeded", now.JobName)}}
	}
	note := fmt.Sprintf("Job %q failed", now.JobName)
	if c := meta.FindStatusCondition(now.Conditions, k8sv1.FooBarConditionComplete); c != nil {
		note = c.Message
	}
	return []status.Event{{Type: corev1.EventTypeWarning, Reason: k8sv1.FooBarEventFailed, Action: "Run", Note: note}}
}
