package foobar

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "foobar"

// Reconciler runs each FooBar's command as a Job and reports its progress.
type Reconciler struct {
	objects.Kit
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	kit := objects.NewKit(mgr, ControllerName)
	kit.Status.Transitions = Transitions
	return &Reconciler{Kit: kit}
}

// SetupWithManager registers the controller: it reconciles a FooBar when the
// FooBar or a Job it controls changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), &batchv1.Job{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&k8sv1.FooBar{}).
		Owns(&batchv1.Job{}).
		Complete(r)
}

// +kubebuilder:rbac:groups=k8s.io,resources=foobars,verbs=get;list;watch
// +kubebuilder:rbac:groups=k8s.io,resources=foobars/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=k8s.io,resources=foobars/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes sure the FooBar's current generation runs in its Job, once,
// that the Jobs of earlier generations are gone, and reports the run's
// progress. When everything already matches it sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fb := &k8sv1.FooBar{}
	if ok, err := r.Fetch(ctx, req, fb); !ok {
		return ctrl.Result{}, err
	}

	step := Plan(fb)
	kids := r.Kit.Reconcile(ctx, fb, "FooBar")
	if step == StepStart {
		// The start is recorded before the Job is created, and never undone:
		// so first ask the API server, in a dry run, whether it would create
		// it. A Job it refuses (quota, admission, a taken name) starts
		// nothing, is reported as Degraded and retried, and costs no write.
		probe := r.Kit
		probe.Client = client.NewDryRunClient(r.Client)
		if check := probe.Reconcile(ctx, fb, "FooBar"); objects.Ensure(check, jobs, Job(fb)) == nil {
			return status.Finish(ctx, r.Status, fb, check, func(out *k8sv1.FooBar) {
				out.Status = Status(fb, Observed{Problem: check.Problem()})
			})
		}
	}
	// The Jobs of earlier generations go, with their pods.
	kids.DeleteRenamed("Job", &batchv1.JobList{}, JobName(fb))
	var obs Observed
	switch step {
	case StepStart:
		if kids.Err() != nil {
			break // reported below, and retried
		}
		// Recorded after the create, a Job deleted before the record (or an
		// operator stopped in between) would leave nothing to say that the
		// command ever ran, and it would run again. A create that then fails
		// anyway (refused after the dry run passed, or a timeout that may
		// have created it) leaves the run started: at most once, at the cost
		// of reporting a run that may never have started as lost.
		started := fb.DeepCopy()
		started.Status = StartStatus(fb)
		if err := r.Status.Write(ctx, fb, started); err != nil {
			return status.Result(err, false)
		}
		fb = started
		obs.Job, obs.Started = objects.Ensure(kids, jobs, Job(fb)), true
	case StepFollow:
		job, err := r.startedJob(ctx, fb)
		if err != nil {
			return ctrl.Result{}, err
		}
		obs.Job, obs.Started, obs.Lost = job, true, job == nil
	}
	obs.Problem = kids.Problem()

	return status.Finish(ctx, r.Status, fb, kids, func(out *k8sv1.FooBar) {
		out.Status = Status(fb, obs)
	})
}

// startedJob returns the Job of fb's started run, or nil when it is gone or
// is not fb's. The cache may not hold a Job created a moment ago yet, so a
// Job it lacks is looked up at the API server before the run is called lost.
func (r *Reconciler) startedJob(ctx context.Context, fb *k8sv1.FooBar) (*batchv1.Job, error) {
	key := types.NamespacedName{Namespace: fb.Namespace, Name: JobName(fb)}
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, key, job)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, job)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Job %q: %w", key.Name, err)
	case !metav1.IsControlledBy(job, fb):
		return nil, nil // ours was deleted, and the name taken since
	}
	return job, nil
}
