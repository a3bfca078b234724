package foo

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "foo"

// clashRecheck is how often a Foo whose Deployment name is taken looks again:
// the foreign Deployment is not in the cache, so its deletion sends no event.
const clashRecheck = 30 * time.Second

// Reconciler makes each Foo's Deployment match its spec and reports status.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly. It is used only to look at
	// a Deployment that is not in the cache because the operator does not own it.
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
	if err := r.Client.Get(ctx, req.NamespacedName, foo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !foo.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the Deployment
	}

	desired := Deployment(foo)
	if err := r.deleteRenamed(ctx, foo, desired.Name); err != nil {
		return ctrl.Result{}, err
	}
	dep, clash, err := r.ensureDeployment(ctx, foo, desired)
	if err != nil {
		return ctrl.Result{}, err
	}

	if err := r.writeStatus(ctx, foo, Status(foo, Observed{Deployment: dep, Clash: clash})); err != nil {
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

// deleteRenamed deletes the Deployments this Foo controls under a name other
// than keep: what is left after spec.deploymentName changed.
func (r *Reconciler) deleteRenamed(ctx context.Context, foo *samplev1alpha1.Foo, keep string) error {
	deleted, err := objects.DeleteRenamed(ctx, r.Client, foo, &appsv1.DeploymentList{}, keep)
	for _, name := range deleted {
		logf.FromContext(ctx).Info("deleted renamed Deployment", "deployment", name, "now", keep)
		r.Recorder.Eventf(foo, nil, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted Deployment %q: spec.deploymentName is now %q", name, keep)
	}
	return err
}

// ensureDeployment creates the Deployment or restores the fields the Foo sets
// on it. It returns the Deployment as last seen, or clash=true when a
// Deployment of that name exists and is not controlled by this Foo.
func (r *Reconciler) ensureDeployment(ctx context.Context, foo *samplev1alpha1.Foo, desired *appsv1.Deployment) (*appsv1.Deployment, bool, error) {
	dep, outcome, err := objects.Deployments.Ensure(ctx, r.Client, r.APIReader, foo, desired)
	switch outcome {
	case objects.Created:
		r.Recorder.Eventf(foo, dep, corev1.EventTypeNormal, "Created", "Create", "Created Deployment %q", desired.Name)
	case objects.Updated:
		logf.FromContext(ctx).Info("updated Deployment to match the Foo", "deployment", desired.Name)
		r.Recorder.Eventf(foo, dep, corev1.EventTypeNormal, "Updated", "Update", "Updated Deployment %q to match the Foo", desired.Name)
	}
	return dep, outcome == objects.Clash, err
}

// writeStatus writes status through the status subresource when it differs
// from foo's, and records the event that goes with it.
func (r *Reconciler) writeStatus(ctx context.Context, foo *samplev1alpha1.Foo, status samplev1alpha1.FooStatus) error {
	if equality.Semantic.DeepEqual(foo.Status, status) {
		return nil
	}
	updated := foo.DeepCopy()
	updated.Status = status
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	if degraded := meta.FindStatusCondition(status.Conditions, ConditionDegraded); degraded != nil && degraded.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(foo, nil, corev1.EventTypeWarning, degraded.Reason, "Reconcile", "%s", degraded.Message)
		return nil
	}
	r.Recorder.Eventf(foo, nil, corev1.EventTypeNormal, "Synced", "Reconcile", "Foo synced successfully")
	return nil
}
