package foobar

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/vocabulary"
)

func sampleFooBar() *k8sv1.FooBar {
	return &k8sv1.FooBar{
		ObjectMeta: metav1.ObjectMeta{Name: "foobar-sample", Namespace: "default", UID: "uid-1", Generation: 1},
		Spec:       k8sv1.FooBarSpec{Foo: "bar", Barz: "false", Command: "echo foobar", Image: "busybox"},
	}
}

func TestJob(t *testing.T) {
	fb := sampleFooBar()
	j := Job(fb)
	if j.Name != "foobar-sample-1" || j.Namespace != "default" {
		t.Errorf("name = %s/%s", j.Namespace, j.Name)
	}
	ref := metav1.GetControllerOf(j)
	if ref == nil || ref.UID != "uid-1" || ref.Kind != "FooBar" || ref.APIVersion != "k8s.io/v1" {
		t.Errorf("controller ref = %+v", ref)
	}
	if j.Labels["app.kubernetes.io/managed-by"] != "kube-envoy-controller" || j.Labels[FooBarLabel] != "foobar-sample" {
		t.Errorf("labels = %v", j.Labels)
	}
	if *j.Spec.BackoffLimit != 0 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("backoffLimit %d restartPolicy %s: the command must run once", *j.Spec.BackoffLimit, j.Spec.Template.Spec.RestartPolicy)
	}
	cs := j.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("containers = %+v", cs)
	}
	c := cs[0]
	if c.Image != "busybox" || len(c.Command) != 3 || c.Command[0] != "sh" || c.Command[1] != "-c" || c.Command[2] != "echo foobar" {
		t.Errorf("image %q command %q", c.Image, c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if len(env) != 2 || env["FOO"] != "bar" || env["BARZ"] != "false" {
		t.Errorf("env = %v", c.Env)
	}

	fb.Generation = 7
	fb.Spec.Image = ""
	if j := Job(fb); j.Name != "foobar-sample-7" || j.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("generation 7, no image: %s %s", j.Name, j.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestStatus(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(time.Minute))
	job := func(active int32, cond batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "foobar-sample-1"}}
		j.Status.Active = active
		if active > 0 || cond != "" {
			j.Status.StartTime = &start
		}
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: end, Message: "BackoffLimitExceeded"}}
			if cond == batchv1.JobComplete {
				j.Status.CompletionTime = &end
			}
		}
		return j
	}
	tests := []struct {
		name                 string
		obs                  Observed
		phase                k8sv1.FooBarPhase
		complete, degraded   metav1.ConditionStatus
		wantStart, wantEnded bool
	}{
		{"no Job yet", Observed{}, k8sv1.PhasePending, "False", "False", false, false},
		{"Job without pods", Observed{Job: job(0, "")}, k8sv1.PhasePending, "False", "False", false, false},
		{"running", Observed{Job: job(1, "")}, k8sv1.PhaseRunning, "False", "False", true, false},
		{"succeeded", Observed{Job: job(0, batchv1.JobComplete)}, k8sv1.PhaseSucceeded, "True", "False", true, true},
		{"failed", Observed{Job: job(0, batchv1.JobFailed)}, k8sv1.PhaseFailed, "True", "False", true, true},
		{"name taken", Observed{Problem: &conditions.Problem{Reason: k8sv1.FooBarReasonErrResourceExists, Message: "taken"}}, k8sv1.PhasePending, "False", "True", false, false},
		{"create refused", Observed{Problem: &conditions.Problem{Reason: "Forbidden", Message: "quota"}}, k8sv1.PhasePending, "False", "True", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb := sampleFooBar()
			st := Status(fb, tt.obs)
			vocabulary.Check(t, fb, st.Conditions)
			if st.Phase != tt.phase || st.JobName != "foobar-sample-1" || st.ObservedGeneration != 1 {
				t.Errorf("phase %s job %s generation %d", st.Phase, st.JobName, st.ObservedGeneration)
			}
			if (st.StartTime != nil) != tt.wantStart || (st.CompletionTime != nil) != tt.wantEnded {
				t.Errorf("startTime %v completionTime %v", st.StartTime, st.CompletionTime)
			}
			if tt.wantEnded && !st.CompletionTime.Equal(&end) {
				t.Errorf("completionTime = %v, want %v", st.CompletionTime, end)
			}
			if c := meta.FindStatusCondition(st.Conditions, k8sv1.FooBarConditionComplete); c == nil || c.Status != tt.complete || c.Reason != string(tt.phase) {
				t.Errorf("Complete = %+v", c)
			}
			if c := meta.FindStatusCondition(st.Conditions, k8sv1.FooBarConditionDegraded); c == nil || c.Status != tt.degraded {
				t.Errorf("Degraded = %+v", c)
			}
		})
	}

	// A generation that finished keeps its status when its Job is gone...
	fb := sampleFooBar()
	fb.Status = Status(fb, Observed{Job: job(0, batchv1.JobComplete)})
	if st := Status(fb, Observed{}); st.Phase != k8sv1.PhaseSucceeded || !st.CompletionTime.Equal(&end) {
		t.Errorf("finished generation after its Job was deleted: %+v", st)
	}
	if !Finished(fb) {
		t.Error("Finished = false for a generation that succeeded")
	}
	// ...but a new generation starts over.
	fb.Generation = 2
	if Finished(fb) {
		t.Error("Finished = true for a generation that has not run")
	}
	if st := Status(fb, Observed{}); st.Phase != k8sv1.PhasePending || st.JobName != "foobar-sample-2" || st.CompletionTime != nil {
		t.Errorf("new generation: %+v", st)
	}
}

// The status alone decides what a reconcile does: a generation's Job is
// created only if its start was never recorded, so the command of one
// generation runs at most once, whatever happens to its Job.
func TestPlan(t *testing.T) {
	tests := []struct {
		name   string
		status k8sv1.FooBarStatus
		want   Step
	}{
		{"never reconciled", k8sv1.FooBarStatus{}, StepStart},
		{"pending, start not recorded (its create was refused)",
			k8sv1.FooBarStatus{Phase: k8sv1.PhasePending, JobName: "foobar-sample-1", ObservedGeneration: 1}, StepStart},
		{"started", k8sv1.FooBarStatus{Phase: k8sv1.PhasePending, JobName: "foobar-sample-1", StartedJob: "foobar-sample-1", ObservedGeneration: 1}, StepFollow},
		{"running", k8sv1.FooBarStatus{Phase: k8sv1.PhaseRunning, JobName: "foobar-sample-1", StartedJob: "foobar-sample-1", ObservedGeneration: 1}, StepFollow},
		{"succeeded", k8sv1.FooBarStatus{Phase: k8sv1.PhaseSucceeded, JobName: "foobar-sample-1", StartedJob: "foobar-sample-1", ObservedGeneration: 1}, StepNone},
		{"failed", k8sv1.FooBarStatus{Phase: k8sv1.PhaseFailed, JobName: "foobar-sample-1", StartedJob: "foobar-sample-1", ObservedGeneration: 1}, StepNone},
		{"lost", Status(sampleFooBar(), Observed{Lost: true}), StepNone},
		{"the previous generation started", k8sv1.FooBarStatus{Phase: k8sv1.PhaseRunning, JobName: "foobar-sample-0", StartedJob: "foobar-sample-0", ObservedGeneration: 0}, StepStart},
		{"the previous generation finished", k8sv1.FooBarStatus{Phase: k8sv1.PhaseSucceeded, JobName: "foobar-sample-0", StartedJob: "foobar-sample-0", ObservedGeneration: 0}, StepStart},
	}
	for _, tt := range tests {
		fb := sampleFooBar()
		fb.Status = tt.status
		if got := Plan(fb); got != tt.want {
			t.Errorf("%s: Plan = %s, want %s", tt.name, got, tt.want)
		}
		if j := Desired(fb); (j != nil) != (tt.want == StepStart) || (j != nil && j.Name != "foobar-sample-1") {
			t.Errorf("%s: Desired = %v, want a Job only to start one", tt.name, j)
		}
	}
}

// The status written before the Job is created records the start; one whose
// Job disappeared before its outcome was known says so, and ends the run.
func TestStartedAndLostStatus(t *testing.T) {
	fb := sampleFooBar()
	st := StartStatus(fb)
	if st.StartedJob != "foobar-sample-1" || st.Phase != k8sv1.PhasePending || st.ObservedGeneration != 1 {
		t.Errorf("start: %+v", st)
	}
	fb.Status = st
	if st := Status(fb, Observed{}); st.StartedJob != "" {
		t.Errorf("a status of a run not started records a start: %+v", st)
	}

	st = Status(fb, Observed{Started: true, Lost: true})
	vocabulary.Check(t, fb, st.Conditions)
	if st.StartedJob != "foobar-sample-1" || st.Phase != k8sv1.PhaseFailed || st.CompletionTime != nil {
		t.Errorf("lost: %+v", st)
	}
	c := meta.FindStatusCondition(st.Conditions, k8sv1.FooBarConditionComplete)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != k8sv1.FooBarReasonJobLost ||
		!strings.Contains(c.Message, `Job "foobar-sample-1" disappeared before its outcome was known`) {
		t.Errorf("Complete = %+v", c)
	}
	if meta.IsStatusConditionTrue(st.Conditions, k8sv1.FooBarConditionDegraded) {
		t.Errorf("a lost run is Degraded: %+v", st.Conditions)
	}
	fb.Status = st
	if !Finished(fb) || Desired(fb) != nil {
		t.Error("a lost run is not over: its Job would be created again")
	}
	if st := Status(fb, Observed{}); st.Phase != k8sv1.PhaseFailed || meta.FindStatusCondition(st.Conditions, k8sv1.FooBarConditionComplete).Reason != k8sv1.FooBarReasonJobLost {
		t.Errorf("a lost run does not keep its status: %+v", st)
	}
}

func TestTransitions(t *testing.T) {
	fb := func(phase k8sv1.FooBarPhase, job string) *k8sv1.FooBar {
		f := sampleFooBar()
		f.Status = k8sv1.FooBarStatus{Phase: phase, JobName: job}
		conditions.SetBool(&f.Status.Conditions, 1, k8sv1.FooBarConditionComplete, IsFinished(phase), string(phase), "Job \""+job+"\" failed: backoff")
		return f
	}
	tests := []struct {
		name          string
		before, after *k8sv1.FooBar
		want          string
	}{
		{"started", fb("", ""), fb(k8sv1.PhasePending, "j-1"), ""},
		{"running", fb(k8sv1.PhasePending, "j-1"), fb(k8sv1.PhaseRunning, "j-1"), ""},
		{"succeeded", fb(k8sv1.PhaseRunning, "j-1"), fb(k8sv1.PhaseSucceeded, "j-1"), `Normal Succeeded Job "j-1" succeeded`},
		{"failed", fb(k8sv1.PhaseRunning, "j-1"), fb(k8sv1.PhaseFailed, "j-1"), `Warning Failed Job "j-1" failed: backoff`},
		{"still succeeded", fb(k8sv1.PhaseSucceeded, "j-1"), fb(k8sv1.PhaseSucceeded, "j-1"), ""},
		{"next generation failed", fb(k8sv1.PhaseFailed, "j-1"), fb(k8sv1.PhaseFailed, "j-2"), `Warning Failed Job "j-2" failed: backoff`},
		{"lost", fb(k8sv1.PhaseRunning, "foobar-sample-1"), func() *k8sv1.FooBar {
			f := sampleFooBar()
			f.Status = Status(f, Observed{Lost: true})
			return f
		}(), `Warning Failed Job "foobar-sample-1" disappeared before its outcome was known; the command of generation 1 is not run again`},
	}
	for _, tt := range tests {
		var got []string
		for _, e := range Transitions(tt.before, tt.after) {
			got = append(got, e.Type+" "+e.Reason+" "+e.Note)
		}
		if strings.Join(got, "; ") != tt.want {
			t.Errorf("%s: events %q, want %q", tt.name, got, tt.want)
		}
	}
}
