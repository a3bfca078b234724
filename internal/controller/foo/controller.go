package foo

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "foo"

// Reconciler makes each Foo's Deployment match its spec and reports status.
type Reconciler struct {
	objects.Kit
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	kit := objects.NewKit(mgr, ControllerName)
	// The status follows from the spec and the children alone: a stale
	// copy's status conflict is written onto the API server's copy.
	kit.Status.Live = kit.APIReader
	return &Reconciler{Kit: kit}
}

// SetupWithManager registers the controller: it reconciles a Foo when the Foo
// or a Deployment it controls changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), &appsv1.Deployment{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&samplev1alpha1.Foo{}).
		Owns(&appsv1.Deployment{}).
		Complete(r)
}

// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos,verbs=get;list;watch
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one Foo's Deployment to its spec. When everything already
// matches it sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	foo := &samplev1alpha1.Foo{}
	if ok, err := r.Fetch(ctx, req, foo); !ok {
		return ctrl.Result{}, err
	}

	want := Deployment(foo)
	kids := r.Kit.Reconcile(ctx, foo, "Foo")
	// A changed spec.deploymentName leaves the old Deployment behind.
	kids.DeleteRenamed("Deployment", &appsv1.DeploymentList{}, want.Name)
	dep := objects.Ensure(kids, objects.Deployments, want)

	return status.Finish(ctx, r.Status, foo, kids, func(out *samplev1alpha1.Foo) {
		out.Status = Status(foo, Observed{Deployment: dep, Problem: kids.Problem()})
	})
}
