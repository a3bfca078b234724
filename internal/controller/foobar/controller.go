package foobar

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"

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

// Reconcile makes sure the FooBar's current generation runs in its Job, that
// the Jobs of earlier generations are gone, and reports the run's progress.
// When everything already matches it sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fb := &k8sv1.FooBar{}
	if ok, err := r.Fetch(ctx, req, fb); !ok {
		return ctrl.Result{}, err
	}

	kids := r.Kit.Reconcile(ctx, fb, "FooBar")
	// The Jobs of earlier generations go, with their pods.
	kids.DeleteRenamed("Job", &batchv1.JobList{}, JobName(fb))
	var job *batchv1.Job
	if want := Desired(fb); want != nil {
		job = objects.Ensure(kids, jobs, want)
	}

	return status.Finish(ctx, r.Status, fb, kids, func(out *k8sv1.FooBar) {
		out.Status = Status(fb, Observed{Job: job, Problem: kids.Problem()})
	})
}
