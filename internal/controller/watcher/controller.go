package watcher

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "watcher"

// Reconciler keeps each Watcher's ConfigMap in line with its spec and
// reports status.
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

// SetupWithManager registers the controller: it reconciles a Watcher when the
// Watcher or the ConfigMap it controls changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&watchv1alpha1.Watcher{}).
		Owns(&corev1.ConfigMap{}).
		Complete(r)
}

// +kubebuilder:rbac:groups=watch.my.domain,resources=watchers,verbs=get;list;watch
// +kubebuilder:rbac:groups=watch.my.domain,resources=watchers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=watch.my.domain,resources=watchers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one Watcher's ConfigMap to its spec. When everything
// already matches it sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &watchv1alpha1.Watcher{}
	if ok, err := r.Fetch(ctx, req, w); !ok {
		return ctrl.Result{}, err
	}

	kids := r.Kit.Reconcile(ctx, w, "Watcher")
	objects.Ensure(kids, objects.ConfigMaps, ConfigMap(w))

	return status.Finish(ctx, r.Status, w, kids, func(out *watchv1alpha1.Watcher) {
		out.Status = Status(w, Observed{Problem: kids.Problem()})
	})
}
