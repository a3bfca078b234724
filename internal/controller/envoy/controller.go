package envoy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

// ControllerName is the controller's name in --controllers, logs and events.
const ControllerName = "envoy"

// Reconciler makes each Envoy's ConfigMap, Deployment, Service,
// PodDisruptionBudget, HorizontalPodAutoscaler and NetworkPolicy match its
// spec and reports the fleet's status.
type Reconciler struct {
	objects.Kit
	Defaults fleet.Defaults
	// Authority issues the client certificates of fleets that reach the
	// built-in xDS server over mutual TLS (Defaults.XDS.MutualTLS).
	Authority *authority.Store
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// NewReconciler returns a Reconciler wired to mgr. ca may be nil when the
// built-in xDS server speaks plaintext.
func NewReconciler(mgr ctrl.Manager, d fleet.Defaults, ca *authority.Store) *Reconciler {
	kit := objects.NewKit(mgr, ControllerName)
	// The status follows from the spec and the children alone: a stale
	// copy's status conflict is written onto the API server's copy.
	kit.Status.Live = kit.APIReader
	return &Reconciler{Kit: kit, Defaults: d, Authority: ca}
}

// mutualTLS reports whether e's proxies need a client certificate.
func (r *Reconciler) mutualTLS(e *examplev1.Envoy) bool {
	return r.Defaults.XDS.MutualTLS && fleet.BuiltinXDS(e) && r.Authority != nil
}

// SetupWithManager registers the controller: an Envoy is reconciled when it
// or one of its children changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{},
		&policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}, &networkingv1.NetworkPolicy{}} {
		if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), obj); err != nil {
			return err
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&examplev1.Envoy{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&networkingv1.NetworkPolicy{})
	if r.Defaults.XDS.MutualTLS && r.Authority != nil {
		// A changed CA changes every fleet's trusted CAs, and may have
		// its certificates reissued.
		b = b.Owns(&corev1.Secret{}).
			Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.fleetsOfCA))
	}
	return b.Complete(r)
}

// fleetsOfCA maps the CA Secret to every fleet of the built-in server.
func (r *Reconciler) fleetsOfCA(ctx context.Context, obj client.Object) []reconcile.Request {
	if client.ObjectKeyFromObject(obj) != r.Authority.Key {
		return nil
	}
	var list examplev1.EnvoyList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Envoys after a change of the xDS CA")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if fleet.BuiltinXDS(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// +kubebuilder:rbac:groups=example.com,resources=envoys,verbs=get;list;watch
// +kubebuilder:rbac:groups=example.com,resources=envoys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=example.com,resources=envoys/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;delete
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
	// The certificate and the ConfigMap first, so that new pods find them.
	var renew time.Time
	problem := (*conditions.Problem)(nil)
	var certErr error
	if r.mutualTLS(e) {
		renew, problem, certErr = r.ensureCertificate(ctx, kids, e)
	}
	objects.Ensure(kids, objects.ConfigMaps, want.ConfigMap)
	dep := objects.Ensure(kids, objects.Deployments, want.Deployment)
	objects.Ensure(kids, objects.Services, want.Service)
	// A budget or an autoscaler the spec no longer asks for goes, as a
	// renamed one does.
	if pdb := want.PodDisruptionBudget; pdb != nil {
		kids.DeleteRenamed("PodDisruptionBudget", &policyv1.PodDisruptionBudgetList{}, pdb.Name)
		objects.Ensure(kids, objects.PodDisruptionBudgets, pdb)
	} else {
		kids.DeleteRenamed("PodDisruptionBudget", &policyv1.PodDisruptionBudgetList{}, "")
	}
	if hpa := want.HorizontalPodAutoscaler; hpa != nil {
		kids.DeleteRenamed("HorizontalPodAutoscaler", &autoscalingv2.HorizontalPodAutoscalerList{}, hpa.Name)
		objects.Ensure(kids, objects.HorizontalPodAutoscalers, hpa)
	} else {
		kids.DeleteRenamed("HorizontalPodAutoscaler", &autoscalingv2.HorizontalPodAutoscalerList{}, "")
	}
	// So does a NetworkPolicy: a fleet of another xDS server, or one that
	// opted out, has none.
	if np := want.NetworkPolicy; np != nil {
		kids.DeleteRenamed("NetworkPolicy", &networkingv1.NetworkPolicyList{}, np.Name)
		objects.Ensure(kids, objects.NetworkPolicies, np)
	} else {
		kids.DeleteRenamed("NetworkPolicy", &networkingv1.NetworkPolicyList{}, "")
	}

	res, err := status.Finish(ctx, r.Status, e, kids, func(out *examplev1.Envoy) {
		out.Status = Status(e, Observed{Desired: want, Deployment: dep, Problem: cmp.Or(kids.Problem(), problem)})
	})
	if certErr != nil {
		// Retried with backoff; the status says why.
		return ctrl.Result{}, errors.Join(certErr, err)
	}
	if until := renew.Sub(r.now()); err == nil && !renew.IsZero() && (res.RequeueAfter == 0 || until < res.RequeueAfter) {
		res.RequeueAfter = max(until, time.Second)
	}
	return res, err
}

// now is the reconciler's clock.
func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// ensureCertificate keeps the fleet's client certificate Secret current, and
// returns when to look again, or why it cannot yet. Only a Secret that is
// not there gets a new certificate: when the Secret cannot be read, the
// error is returned and nothing is written, for a failed read must not
// rotate the fleet's identity.
func (r *Reconciler) ensureCertificate(ctx context.Context, kids *objects.Children, e *examplev1.Envoy) (time.Time, *conditions.Problem, error) {
	now := r.now()
	a, err := r.Authority.Authority(ctx)
	if err != nil {
		// The leader makes the CA at start: its Secret's event brings us back.
		return now.Add(5 * time.Second), &conditions.Problem{Reason: examplev1.EnvoyReasonNoCertificateAuthority,
			Message: fmt.Sprintf("the fleet's client certificate cannot be issued yet: %v", err)}, nil
	}
	var existing *corev1.Secret
	found := &corev1.Secret{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: fleet.ClientSecretName(e)}, found); {
	case err == nil:
		existing = found
	case !apierrors.IsNotFound(err):
		err = fmt.Errorf("reading the fleet's client certificate Secret %q: %w", fleet.ClientSecretName(e), err)
		return time.Time{}, conditions.FromError(err), err
	}
	want, renew, err := ClientCertificate(e, a, existing, now, r.Authority.Options)
	if err != nil {
		return now.Add(5 * time.Second), &conditions.Problem{Reason: examplev1.EnvoyReasonNoCertificateAuthority, Message: err.Error()}, nil
	}
	if got := objects.Ensure(kids, objects.Secrets, want); got != nil && existing != nil && !sameCertificate(existing, want) {
		ctrl.LoggerFrom(ctx).Info("renewed the fleet's xDS client certificate", "secret", want.Name)
	}
	return renew, nil, nil
}
