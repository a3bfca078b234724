package watcher

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "watcher"

// clashRecheck is how often a Watcher whose ConfigMap name is taken looks
// again: the foreign ConfigMap is not in the cache, so its deletion sends no event.
const clashRecheck = 30 * time.Second

// Reconciler keeps each Watcher's ConfigMap in line with its spec and
// reports status.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly. It is used only to look at
	// a ConfigMap that is not in the cache because the operator does not own it.
	APIReader client.Reader
	Recorder  events.EventRecorder
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(ControllerName),
	}
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
	if err := r.Client.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the ConfigMap
	}

	desired := ConfigMap(w)
	cm, outcome, err := objects.ConfigMaps.Ensure(ctx, r.Client, r.APIReader, w, desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch outcome {
	case objects.Created:
		r.Recorder.Eventf(w, cm, corev1.EventTypeNormal, "Created", "Create", "Created ConfigMap %q", desired.Name)
	case objects.Updated:
		logf.FromContext(ctx).Info("updated ConfigMap to match the Watcher", "configMap", desired.Name)
		r.Recorder.Eventf(w, cm, corev1.EventTypeNormal, "Updated", "Update", "Updated ConfigMap %q to match the Watcher", desired.Name)
	}
	clash := outcome == objects.Clash

	if err := r.writeStatus(ctx, w, Status(w, Observed{Clash: clash})); err != nil {
		if apierrors.IsConflict(err) {
			// Our copy is stale; the newer version is on its way and reconciles again.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	if clash {
		return ctrl.Result{RequeueAfter: clashRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// writeStatus writes status through the status subresource when it differs
// from w's, and records the event that goes with it.
func (r *Reconciler) writeStatus(ctx context.Context, w *watchv1alpha1.Watcher, status watchv1alpha1.WatcherStatus) error {
	if equality.Semantic.DeepEqual(w.Status, status) {
		return nil
	}
	updated := w.DeepCopy()
	updated.Status = status
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	if degraded := meta.FindStatusCondition(status.Conditions, ConditionDegraded); degraded != nil && degraded.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, degraded.Reason, "Reconcile", "%s", degraded.Message)
		return nil
	}
	r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, "Synced", "Reconcile", "Watcher synced successfully")
	return nil
}
