// Package gateway is the Gateway API's controller, for the GatewayClasses
// whose controllerName is this operator's (xds/gateway.ControllerName). It
// accepts each such GatewayClass, and gives each of its Gateways a fleet:
// an Envoy the Gateway controls (render.go), made from the Envoy the
// class's parametersRef names. What the fleet serves of the Gateway and its
// routes, and their status, is the envoyconfig controller's: a Gateway's
// content goes through the same stages as an EnvoyConfig's
// (internal/xds/gateway).
package gateway

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/resync"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "gateway"

// Reconciler reconciles Gateways (Reconcile) and GatewayClasses
// (ReconcileClass).
type Reconciler struct {
	objects.Kit
	// gateways and classes are the two controllers' queues, where a resync
	// (package resync) queues every Gateway, or every class, when a watch's
	// map could not list the ones an event concerns.
	gateways, classes resync.Queue
}

// NewReconciler returns a Reconciler wired to mgr.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{Kit: objects.NewKit(mgr, ControllerName)}
}

// SetupWithManager registers the Gateway and the GatewayClass controllers.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), &examplev1.Envoy{}); err != nil {
		return err
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&gwv1.Gateway{}).
		Owns(&examplev1.Envoy{}).
		// A class's change (its parametersRef, or its Envoy template)
		// changes its Gateways' fleets.
		Watches(&gwv1.GatewayClass{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfClass)).
		Watches(&examplev1.Envoy{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfTemplate)).
		// A route that still names, in its status, a Gateway that is
		// gone has that entry taken out (routes.go).
		Watches(&gwv1.HTTPRoute{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysGone)).
		Watches(&gwv1.GRPCRoute{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysGone)).
		WatchesRawSource(r.gateways.Source()).
		Complete(r)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName+"class").
		For(&gwv1.GatewayClass{}).
		Watches(&examplev1.Envoy{}, handler.EnqueueRequestsFromMapFunc(r.classesOfTemplate)).
		WatchesRawSource(r.classes.Source()).
		Complete(reconcile.Func(r.ReconcileClass))
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/finalizers,verbs=update
// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes/status;grpcroutes/status,verbs=get;update;patch

// Reconcile gives one Gateway of this operator's classes its fleet. When
// the fleet already matches it sends no write. A Gateway that is gone has
// its entries taken out of its routes' status (routes.go). A resync queues
// every Gateway of its namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if resync.Is(req) {
		return ctrl.Result{}, r.resyncGateways(ctx, req.Namespace)
	}
	gw := &gwv1.Gateway{}
	switch err := r.Client.Get(ctx, req.NamespacedName, gw); {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.leaveRoutes(ctx, req.NamespacedName)
	case err != nil:
		return ctrl.Result{}, err
	case !gw.DeletionTimestamp.IsZero():
		return ctrl.Result{}, nil
	}
	class, template, problem, err := r.class(ctx, string(gw.Spec.GatewayClassName))
	if err != nil || class == nil {
		return ctrl.Result{}, err
	}
	if problem != "" {
		return ctrl.Result{}, r.notProgrammed(ctx, gw, string(gwv1.GatewayReasonInvalidParameters), problem)
	}
	kids := r.Kit.Reconcile(ctx, gw, "Gateway")
	objects.Ensure(kids, envoys, Fleet(gw, template))
	kids.Report()
	if kids.Clashed() {
		return ctrl.Result{RequeueAfter: status.ClashRecheck}, r.notProgrammed(ctx, gw, string(gwv1.GatewayReasonPending),
			fmt.Sprintf("an Envoy named %q that this Gateway does not control is in the namespace: the Gateway's fleet takes its name", gateway.FleetName(gw.Name)))
	}
	return ctrl.Result{}, kids.Err()
}

// notProgrammed writes a Gateway whose fleet cannot be made as not
// programmed, and why. Once the fleet exists, its controller writes the
// Gateway's status.
func (r *Reconciler) notProgrammed(ctx context.Context, gw *gwv1.Gateway, reason, msg string) error {
	after := gw.DeepCopy()
	meta.SetStatusCondition(&after.Status.Conditions, metav1.Condition{Type: string(gwv1.GatewayConditionProgrammed),
		Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gw.Generation})
	if equality.Semantic.DeepEqual(gw.Status, after.Status) {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Status().Update(ctx, after))
}

// class returns gw's GatewayClass when it is this operator's, with the
// Envoy its parametersRef names, or what is wrong with that reference.
func (r *Reconciler) class(ctx context.Context, name string) (*gwv1.GatewayClass, *examplev1.Envoy, string, error) {
	class := &gwv1.GatewayClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
		return nil, nil, "", client.IgnoreNotFound(err)
	}
	if class.Spec.ControllerName != gateway.ControllerName {
		return nil, nil, "", nil
	}
	template, problem, err := r.template(ctx, class)
	return class, template, problem, err
}

// template returns the Envoy a class's parametersRef names (nil for none),
// or what is wrong with the reference.
func (r *Reconciler) template(ctx context.Context, class *gwv1.GatewayClass) (*examplev1.Envoy, string, error) {
	ref := class.Spec.ParametersRef
	if ref == nil {
		return nil, "", nil
	}
	if string(ref.Group) != examplev1.GroupVersion.Group || string(ref.Kind) != "Envoy" {
		return nil, fmt.Sprintf("spec.parametersRef must name an Envoy (group %s), not a %s of group %q", examplev1.GroupVersion.Group, ref.Kind, ref.Group), nil
	}
	if ref.Namespace == nil {
		return nil, "spec.parametersRef.namespace must name the Envoy's namespace", nil
	}
	e := &examplev1.Envoy{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: string(*ref.Namespace), Name: ref.Name}, e); {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("spec.parametersRef names Envoy %s/%s, which does not exist", *ref.Namespace, ref.Name), nil
	case err != nil:
		return nil, "", err
	}
	return e, "", nil
}

// ReconcileClass accepts a GatewayClass of this operator's, or says why
// its parametersRef cannot be used. A resync queues every class.
func (r *Reconciler) ReconcileClass(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if resync.Is(req) {
		return ctrl.Result{}, r.resyncClasses(ctx)
	}
	class := &gwv1.GatewayClass{}
	if ok, err := r.Fetch(ctx, req, class); !ok || class.Spec.ControllerName != gateway.ControllerName {
		return ctrl.Result{}, err
	}
	_, problem, err := r.template(ctx, class)
	if err != nil {
		return ctrl.Result{}, err
	}
	after := class.DeepCopy()
	after.Status = ClassStatus(class, problem)
	if equality.Semantic.DeepEqual(class.Status, after.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Status().Update(ctx, after))
}

// What brings a Gateway or a class back to Reconcile when a class or an
// Envoy changes. A map whose List fails loses nothing: it queues a resync
// (package resync) of every Gateway, or of every class, instead of the ones
// it could not find.

// gatewaysOfClass queues the Gateways of a class; every Gateway when they
// cannot be listed.
func (r *Reconciler) gatewaysOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	out, err := r.gatewaysOf(ctx, []string{o.GetName()})
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing the Gateways of a GatewayClass; resyncing every Gateway", "gatewayClass", o.GetName())
		return []reconcile.Request{resync.Request("")}
	}
	return out
}

// classesOfTemplate queues the classes whose parametersRef names an Envoy;
// every class when they cannot be listed.
func (r *Reconciler) classesOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := r.classesNaming(ctx, o)
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing the GatewayClasses of an Envoy; resyncing every class", "envoy", client.ObjectKeyFromObject(o))
		return []reconcile.Request{resync.Request("")}
	}
	out := make([]reconcile.Request, 0, len(names))
	for _, name := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return out
}

// gatewaysOfTemplate queues the Gateways of the classes whose parametersRef
// names an Envoy; every Gateway when the classes or the Gateways cannot be
// listed.
func (r *Reconciler) gatewaysOfTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	names, err := r.classesNaming(ctx, o)
	var out []reconcile.Request
	if err == nil && len(names) > 0 {
		out, err = r.gatewaysOf(ctx, names)
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing the Gateways of an Envoy; resyncing every Gateway", "envoy", client.ObjectKeyFromObject(o))
		return []reconcile.Request{resync.Request("")}
	}
	return out
}

// gatewaysOf returns the Gateways of the named classes.
func (r *Reconciler) gatewaysOf(ctx context.Context, classes []string) ([]reconcile.Request, error) {
	var list gwv1.GatewayList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing Gateways: %w", err)
	}
	var out []reconcile.Request
	for _, gw := range list.Items {
		if slices.Contains(classes, string(gw.Spec.GatewayClassName)) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}})
		}
	}
	return out, nil
}

// classesNaming returns the names of the classes whose parametersRef names
// the Envoy o.
func (r *Reconciler) classesNaming(ctx context.Context, o client.Object) ([]string, error) {
	var list gwv1.GatewayClassList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing GatewayClasses: %w", err)
	}
	var out []string
	for _, c := range list.Items {
		if namesTemplate(c, o) {
			out = append(out, c.Name)
		}
	}
	return out, nil
}

// resyncGateways queues every Gateway of namespace ns (every namespace
// when ns is ""). A failed List is returned, for the queue to retry the
// resync.
func (r *Reconciler) resyncGateways(ctx context.Context, ns string) error {
	var list gwv1.GatewayList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing Gateways to resync them: %w", err)
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, gw := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}})
	}
	return r.gateways.Add(reqs...)
}

// resyncClasses queues every GatewayClass. A failed List is returned, for
// the queue to retry the resync.
func (r *Reconciler) resyncClasses(ctx context.Context) error {
	var list gwv1.GatewayClassList
	if err := r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("listing GatewayClasses to resync them: %w", err)
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}})
	}
	return r.classes.Add(reqs...)
}

// namesTemplate reports whether a class's parametersRef names the Envoy o.
func namesTemplate(c gwv1.GatewayClass, o client.Object) bool {
	ref := c.Spec.ParametersRef
	return c.Spec.ControllerName == gateway.ControllerName && ref != nil && string(ref.Kind) == "Envoy" &&
		string(ref.Group) == examplev1.GroupVersion.Group && ref.Namespace != nil &&
		string(*ref.Namespace) == o.GetNamespace() && ref.Name == o.GetName()
}

// envoys compares an Envoy's labels and spec with the desired ones; an
// update puts the spec back, keeping the labels others added.
var envoys = objects.Child[*examplev1.Envoy]{
	Kind: "Envoy",
	Matches: func(existing, desired *examplev1.Envoy) (bool, error) {
		for k, v := range desired.Labels {
			if existing.Labels[k] != v {
				return false, nil
			}
		}
		return objects.Contains(existing.Spec, desired.Spec)
	},
	Merge: func(existing, desired *examplev1.Envoy) *examplev1.Envoy {
		out := existing.DeepCopy()
		out.Labels = objects.MergeMaps(existing.Labels, desired.Labels)
		out.Spec = desired.Spec
		return out
	},
}
