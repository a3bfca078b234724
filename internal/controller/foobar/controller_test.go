package foobar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.MainWith(m, func(mgr ctrl.Manager) testenv.Controller { return NewReconciler(mgr) })
}

func newFooBar(ns, name, command string) *k8sv1.FooBar {
	return &k8sv1.FooBar{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       k8sv1.FooBarSpec{Foo: "bar", Barz: "false", Command: command},
	}
}

func waitPhase(t *testing.T, fb *k8sv1.FooBar, phase k8sv1.FooBarPhase) *k8sv1.FooBar {
	t.Helper()
	return testenv.WaitSettled(t, suite.Client, fb.DeepCopy(), func(f *k8sv1.FooBar) bool {
		return f.Status.ObservedGeneration == f.Generation && f.Status.Phase == phase
	})
}

// Envtest runs no Job controller: these play its part.
func jobRunning(t *testing.T, j *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	j.Status.StartTime = &now
	j.Status.Active = 1
	j.Status.Ready = ptr.To[int32](1)
	if err := suite.Client.Status().Update(context.Background(), j); err != nil {
		t.Fatal(err)
	}
}

func jobEnded(t *testing.T, j *batchv1.Job, succeeded bool) {
	t.Helper()
	now := metav1.Now()
	j.Status.Active = 0
	j.Status.Ready = ptr.To[int32](0)
	if succeeded {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		}
	} else {
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
		}
	}
	if err := suite.Client.Status().Update(context.Background(), j); err != nil {
		t.Fatal(err)
	}
}

func TestRunsTheCommandAsAJob(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	fb := newFooBar(ns, "foobar-sample", "echo foobar")
	if err := suite.Client.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	j := testenv.WaitFor(t, suite.Client, ns, "foobar-sample-1", &batchv1.Job{}, nil)
	if !metav1.IsControlledBy(j, fb) {
		t.Errorf("Job not controlled by the FooBar: %+v", j.OwnerReferences)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "sh -c echo foobar" || c.Image != "busybox" {
		t.Errorf("command %q image %q", c.Command, c.Image)
	}
	if len(c.Env) != 2 || c.Env[0] != (corev1.EnvVar{Name: "FOO", Value: "bar"}) || c.Env[1] != (corev1.EnvVar{Name: "BARZ", Value: "false"}) {
		t.Errorf("env = %+v", c.Env)
	}
	got := waitPhase(t, fb, k8sv1.PhasePending)
	if got.Status.JobName != "foobar-sample-1" {
		t.Errorf("jobName = %q", got.Status.JobName)
	}
	suite.WaitEvent(t, ns, "foobar-sample", `Normal Started Created Job "foobar-sample-1"`)

	jobRunning(t, j)
	got = waitPhase(t, fb, k8sv1.PhaseRunning)
	if got.Status.StartTime == nil {
		t.Error("no startTime while running")
	}
	jobEnded(t, j, true)
	got = waitPhase(t, fb, k8sv1.PhaseSucceeded)
	if got.Status.CompletionTime == nil || !meta.IsStatusConditionTrue(got.Status.Conditions, k8sv1.FooBarConditionComplete) {
		t.Errorf("succeeded: completionTime %v conditions %+v", got.Status.CompletionTime, got.Status.Conditions)
	}
	suite.WaitEvent(t, ns, "foobar-sample", `Normal Succeeded Job "foobar-sample-1" succeeded`)

	// The run is over: deleting its Job does not run the command again.
	if err := suite.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, suite.Client, ns, "foobar-sample-1", &batchv1.Job{})
	suite.Touch(t, ControllerName, fb)
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foobar-sample-1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the finished generation's Job was created again (err %v)", err)
	}
	if got := waitPhase(t, fb, k8sv1.PhaseSucceeded); got.Status.JobName != "foobar-sample-1" {
		t.Errorf("status lost after the Job was deleted: %+v", got.Status)
	}
}

func TestFailedRun(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	fb := newFooBar(ns, "failing", "exit 1")
	if err := suite.Client.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	j := testenv.WaitFor(t, suite.Client, ns, "failing-1", &batchv1.Job{}, nil)
	jobRunning(t, j)
	jobEnded(t, j, false)
	got := waitPhase(t, fb, k8sv1.PhaseFailed)
	c := meta.FindStatusCondition(got.Status.Conditions, k8sv1.FooBarConditionComplete)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Failed" || !strings.Contains(c.Message, "backoff limit") {
		t.Errorf("Complete = %+v", c)
	}
	if got.Status.CompletionTime == nil {
		t.Error("no completionTime for a failed run")
	}
	suite.WaitEvent(t, ns, "failing", `Warning Failed Job "failing-1" failed`)
}

func TestNewGenerationReplacesTheJob(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	fb := newFooBar(ns, "regen", "echo one")
	if err := suite.Client.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	j := testenv.WaitFor(t, suite.Client, ns, "regen-1", &batchv1.Job{}, nil)
	jobRunning(t, j)
	waitPhase(t, fb, k8sv1.PhaseRunning)

	patch := client.MergeFrom(fb.DeepCopy())
	fb.Spec.Command = "echo two"
	if err := suite.Client.Patch(ctx, fb, patch); err != nil {
		t.Fatal(err)
	}
	j2 := testenv.WaitFor(t, suite.Client, ns, "regen-2", &batchv1.Job{}, nil)
	if got := j2.Spec.Template.Spec.Containers[0].Command[2]; got != "echo two" {
		t.Errorf("new Job runs %q", got)
	}
	testenv.WaitGone(t, suite.Client, ns, "regen-1", &batchv1.Job{})
	got := waitPhase(t, fb, k8sv1.PhasePending)
	if got.Status.JobName != "regen-2" || got.Status.StartTime != nil {
		t.Errorf("status of the new generation: %+v", got.Status)
	}
	suite.WaitEvent(t, ns, "regen", `Normal Deleted Deleted Job "regen-1"`)

	// A change that is not to the spec is not a new generation.
	suite.Touch(t, ControllerName, fb)
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "regen-3"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("an annotation change started a new Job (err %v)", err)
	}
}

func TestNameClashIsReportedAndNotTakenOver(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	theirs := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "clash-1", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "x", Image: "theirs"}},
		}}},
	}
	if err := suite.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	fb := newFooBar(ns, "clash", "true")
	if err := suite.Client.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	suite.WaitEvent(t, ns, "clash", `Warning ErrResourceExists Job "clash-1" already exists and is not managed by FooBar "clash"`)
	got := waitPhase(t, fb, k8sv1.PhasePending)
	if c := testenv.Condition(got, k8sv1.FooBarConditionDegraded); c.Status != metav1.ConditionTrue || c.Reason != k8sv1.FooBarReasonErrResourceExists {
		t.Errorf("Degraded = %+v", c)
	}
	after := testenv.WaitFor(t, suite.Client, ns, "clash-1", &batchv1.Job{}, nil)
	if after.ResourceVersion != theirs.ResourceVersion || len(after.OwnerReferences) != 0 {
		t.Errorf("the foreign Job was modified")
	}
}

// A reconcile that finds everything as desired sends no write request, both
// while the Job runs and after it succeeded.
func TestSettledReconcileWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	fb := newFooBar(ns, "settled", "sleep 1")
	if err := suite.Client.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	j := testenv.WaitFor(t, suite.Client, ns, "settled-1", &batchv1.Job{}, nil)
	jobRunning(t, j)
	waitPhase(t, fb, k8sv1.PhaseRunning)
	suite.ExpectNoWrites(t, ControllerName, fb, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fb)})
	jobEnded(t, j, true)
	waitPhase(t, fb, k8sv1.PhaseSucceeded)
	suite.ExpectNoWrites(t, ControllerName, fb, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fb)})
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	tests := []struct {
		fb    *k8sv1.FooBar
		field string
	}{
		{newFooBar(ns, "no-command", ""), "spec.command"},
		{newFooBar(ns, strings.Repeat("x", 53), "true"), "metadata.name"},
	}
	for _, tt := range tests {
		err := suite.Client.Create(ctx, tt.fb)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("FooBar %s: got %v, want an Invalid error naming %s", tt.fb.Name, err, tt.field)
		}
	}

	// The seed's fields, as the seed's sample writes them, and spec.image's default.
	raw := []byte(`{"apiVersion":"k8s.io/v1","kind":"FooBar","metadata":{"name":"foobar-sample"},` +
		`"spec":{"foo":"bar","barz":"false","command":"echo foobar"}}`)
	fb := &k8sv1.FooBar{ObjectMeta: metav1.ObjectMeta{Name: "foobar-sample", Namespace: ns}}
	if err := suite.Client.Patch(ctx, fb, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if fb.Spec.Image != "busybox" || fb.Spec.Foo != "bar" || fb.Spec.Barz != "false" {
		t.Errorf("spec = %+v, want image defaulted to busybox", fb.Spec)
	}
}

// A Job deleted while it runs, before its outcome is recorded, is not created
// again: that would run the command a second time. The run ends as lost, and
// the status says why; a new generation runs the command again.
func TestLostJobIsNotRunAgain(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	fb := newFooBar(ns, "lost", "echo once")
	if err := suite.Client.Create(ctx, fb); err != nil {
		t.Fatal(err)
	}
	j := testenv.WaitFor(t, suite.Client, ns, "lost-1", &batchv1.Job{}, nil)
	jobRunning(t, j)
	if got := waitPhase(t, fb, k8sv1.PhaseRunning); got.Status.StartedJob != "lost-1" {
		t.Errorf("startedJob = %q while its Job runs", got.Status.StartedJob)
	}

	if err := suite.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	got := waitLost(t, fb, j)
	c := meta.FindStatusCondition(got.Status.Conditions, k8sv1.FooBarConditionComplete)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != k8sv1.FooBarReasonJobLost ||
		!strings.Contains(c.Message, `Job "lost-1" disappeared before its outcome was known`) {
		t.Errorf("Complete = %+v", c)
	}
	suite.WaitEvent(t, ns, "lost", `Warning Failed Job "lost-1" disappeared before its outcome was known`)

	// However often it is reconciled, the generation's Job is not created again.
	suite.Touch(t, ControllerName, got)
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lost-1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the lost run's Job was created again (err %v)", err)
	}
	var jobs batchv1.JobList
	if err := suite.Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("%d Jobs after the run was lost, want none", len(jobs.Items))
	}

	// A new generation is a new run.
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(fb), fb); err != nil {
		t.Fatal(err)
	}
	fb.Spec.Command = "echo again"
	if err := suite.Client.Update(ctx, fb); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, suite.Client, ns, "lost-2", &batchv1.Job{}, nil)
	if got := waitPhase(t, fb, k8sv1.PhasePending); got.Status.StartedJob != "lost-2" {
		t.Errorf("startedJob = %q for generation 2", got.Status.StartedJob)
	}
}

// waitLost waits until fb's run, whose Job j was deleted, is reported lost
// (phase Failed), and fails at once on any other outcome: the Job made
// again, which would run the command a second time, or another phase.
func waitLost(t *testing.T, fb *k8sv1.FooBar, j *batchv1.Job) *k8sv1.FooBar {
	t.Helper()
	ctx := context.Background()
	got := &k8sv1.FooBar{}
	testenv.Eventually(t, "the run to end as lost", func() (bool, error) {
		again := &batchv1.Job{}
		switch err := suite.Client.Get(ctx, client.ObjectKeyFromObject(j), again); {
		case err == nil && again.UID != j.UID:
			return false, testenv.Unexpected("the lost run's Job %s was created again: its command would run twice", j.Name)
		case err != nil && !apierrors.IsNotFound(err):
			return false, err
		}
		if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(fb), got); err != nil {
			return false, err
		}
		if !testenv.Observed(got) || got.Status.ObservedGeneration != got.Generation {
			return false, fmt.Errorf("generation %d not observed yet", got.Generation)
		}
		switch got.Status.Phase {
		case k8sv1.PhaseFailed:
			return true, nil
		case k8sv1.PhaseRunning:
			return false, errors.New("still Running")
		}
		return false, testenv.Unexpected("phase %s after the run's Job disappeared, want Failed", got.Status.Phase)
	})
	return got
}

// A Job the API server refuses (an admission policy here; a quota alike)
// starts nothing: the FooBar is Degraded, retried with backoff, and runs
// once the Job is admitted.
func TestRefusedJobIsDegraded(t *testing.T) {
	ns := suite.Namespace(t)
	testenv.TestRefusal(t, &suite, testenv.Refusal[*k8sv1.FooBar]{
		Controller: ControllerName,
		Object:     newFooBar(ns, "refused", "echo one"),
		Probe:      testenv.JobProbe(ns),
		Resource:   "jobs",
		Change:     func(fb *k8sv1.FooBar) { fb.Spec.Command = "echo two" },
		Recovered: func(fb *k8sv1.FooBar) bool {
			return fb.Status.StartedJob == JobName(fb) && fb.Status.JobName == JobName(fb)
		},
	})
}
