package envoy

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "envoy"

// Reconciler makes each Envoy's ConfigMap, Deployment and Service match its
// spec and reports the fleet's status.
type Reconciler struct {
	objects.Kit
	Defaults fleet.Defaults
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager, d fleet.Defaults) *Reconciler {
	kit := objects.NewKit(mgr, ControllerName)
	// The status follows from the spec and the children alone: a stale
	// copy's status conflict is written onto the API server's copy.
	kit.Status.Live = kit.APIReader
	return &Reconciler{Kit: kit, Defaults: d}
}

// SetupWithManager registers the controller: an Envoy is reconciled when it
// or one of its children changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}} {
		if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), obj); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&examplev1.Envoy{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(r)
}

// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch
// +kubebuilder:rbac:groups=example.com,resources=envoys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=example.com,resources=envoys/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one Envoy's children to its spec. When everything already
// matches it sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	e := &examplev1.Envoy{}
	if ok, err := r.Fetch(ctx, req, e); !ok {
		return ctrl.Result{}, err
	}

	want, err := Desired(e, r.Defaults)
	if err != nil {
		// Report it, and wait for a new spec.
		return status.Finish(ctx, r.Status, e, nil, func(out *examplev1.Envoy) {
			out.Status = Status(e, Observed{Desired: want, Problem: invalidSpec(err)})
		})
	}

	kids := r.Kit.Reconcile(ctx, e, "Envoy")
	kids.DeleteRenamed("ConfigMap", &corev1.ConfigMapList{}, want.ConfigMap.Name)
	kids.DeleteRenamed("Deployment", &appsv1.DeploymentList{}, want.Deployment.Name)
	kids.DeleteRenamed("Service", &corev1.ServiceList{}, want.Service.Name)
	// The ConfigMap first, so that new pods find their bootstrap.
	objects.Ensure(kids, objects.ConfigMaps, want.ConfigMap)
	dep := objects.Ensure(kids, objects.Deployments, want.Deployment)
	objects.Ensure(kids, objects.Services, want.Service)

	return status.Finish(ctx, r.Status, e, kids, func(out *examplev1.Envoy) {
		out.Status = Status(e, Observed{Desired: want, Deployment: dep, Problem: kids.Problem()})
	})
}
