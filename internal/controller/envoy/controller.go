package envoy

import (
	"context"
	"fmt"
	"reflect"
	"strings"
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

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	proxy "github.com/kube-envoy-controller/kube-envoy-controller/internal/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "envoy"

// clashRecheck is how often an Envoy whose child names are taken looks again:
// foreign objects are not cached, so their deletion sends no event.
const clashRecheck = 30 * time.Second

// Reconciler makes each Envoy's ConfigMap, Deployment and Service match its
// spec and reports the fleet's status.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Defaults  Defaults
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager, d Defaults) *Reconciler {
	return &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(ControllerName),
		Defaults:  d,
	}
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
	if err := r.Client.Get(ctx, req.NamespacedName, e); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !e.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the children
	}

	xds := XDSServer(e, r.Defaults)
	bootstrap, err := proxy.RenderBootstrap(xds)
	if err != nil {
		// Admission should have refused such a spec; report it, and wait for a new one.
		return ctrl.Result{}, r.writeStatus(ctx, e, Status(e, Observed{XDS: xds, Invalid: err}))
	}
	hash := proxy.Hash(bootstrap)

	if err := r.deleteRenamed(ctx, e); err != nil {
		return ctrl.Result{}, err
	}

	obs := Observed{BootstrapHash: hash, XDS: xds}
	// The ConfigMap first, so that new pods find their bootstrap.
	if err := ensure(ctx, r, e, objects.ConfigMaps, ConfigMap(e, bootstrap), &obs); err != nil {
		return ctrl.Result{}, err
	}
	if err := ensure(ctx, r, e, objects.Deployments, Deployment(e, hash), &obs); err != nil {
		return ctrl.Result{}, err
	}
	if err := ensure(ctx, r, e, objects.Services, Service(e), &obs); err != nil {
		return ctrl.Result{}, err
	}

	for verb, what := range obs.changed {
		// One event per reconcile, whatever the number of children it touched.
		r.Recorder.Eventf(e, nil, corev1.EventTypeNormal, verb, verb, "%s %s", verb, strings.Join(what, ", "))
	}

	if err := r.writeStatus(ctx, e, Status(e, obs)); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil // a newer version is on its way
		}
		return ctrl.Result{}, err
	}
	if len(obs.Clashes) > 0 {
		return ctrl.Result{RequeueAfter: clashRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// ensure reconciles one child and records what it found in obs.
func ensure[T client.Object](ctx context.Context, r *Reconciler, e *examplev1.Envoy, child objects.Child[T], desired T, obs *Observed) error {
	kind := reflect.TypeOf(desired).Elem().Name()
	got, outcome, err := child.Ensure(ctx, r.Client, r.APIReader, e, desired)
	if err != nil {
		return err
	}
	switch outcome {
	case objects.Clash:
		obs.Clashes = append(obs.Clashes, kind+" "+desired.GetName())
	case objects.Created, objects.Updated:
		verb := map[objects.Outcome]string{objects.Created: "Created", objects.Updated: "Updated"}[outcome]
		logf.FromContext(ctx).Info(verb+" child", "kind", kind, "name", desired.GetName())
		if obs.changed == nil {
			obs.changed = map[string][]string{}
		}
		obs.changed[verb] = append(obs.changed[verb], fmt.Sprintf("%s %q", kind, desired.GetName()))
	}
	if d, ok := any(got).(*appsv1.Deployment); ok && outcome != objects.Clash {
		obs.Deployment = d
	}
	return nil
}

// deleteRenamed deletes the children this Envoy controls under names its
// spec no longer gives them.
func (r *Reconciler) deleteRenamed(ctx context.Context, e *examplev1.Envoy) error {
	for _, c := range []struct {
		kind string
		list client.ObjectList
		keep string
	}{
		{"ConfigMap", &corev1.ConfigMapList{}, ConfigMapName(e)},
		{"Deployment", &appsv1.DeploymentList{}, Name(e)},
		{"Service", &corev1.ServiceList{}, Name(e)},
	} {
		deleted, err := objects.DeleteRenamed(ctx, r.Client, e, c.list, c.keep)
		for _, name := range deleted {
			logf.FromContext(ctx).Info("deleted renamed child", "kind", c.kind, "name", name)
			r.Recorder.Eventf(e, nil, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted %s %q: the spec now names it %q", c.kind, name, c.keep)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeStatus writes status through the status subresource when it differs
// from e's, with a Warning event when the Envoy becomes Degraded.
func (r *Reconciler) writeStatus(ctx context.Context, e *examplev1.Envoy, status examplev1.EnvoyStatus) error {
	if equality.Semantic.DeepEqual(e.Status, status) {
		return nil
	}
	updated := e.DeepCopy()
	updated.Status = status
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	was := meta.FindStatusCondition(e.Status.Conditions, ConditionDegraded)
	now := meta.FindStatusCondition(status.Conditions, ConditionDegraded)
	if now != nil && now.Status == metav1.ConditionTrue && (was == nil || was.Status != now.Status || was.Message != now.Message) {
		r.Recorder.Eventf(e, nil, corev1.EventTypeWarning, now.Reason, "Reconcile", "%s", now.Message)
	}
	return nil
}
