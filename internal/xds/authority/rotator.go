package authority

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
)

// RotatorName is the rotator's controller name in logs and metrics.
const RotatorName = "xds-ca"

// The CA Secret is read and updated by name. create cannot be limited by name.
//
// +kubebuilder:rbac:groups="",namespace=kube-envoy-controller,resources=secrets,resourceNames=kube-envoy-controller-xds-ca,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=kube-envoy-controller,resources=secrets,verbs=create

// Rotator makes the CA when there is none (or it cannot be read) and
// rotates it as pki.Rotate says. It runs on the leader only, as a
// controller of the one Secret: it looks again when the Secret changes and
// when the next rotation is due.
type Rotator struct {
	Client    client.Client
	APIReader client.Reader
	Key       types.NamespacedName
	Options   pki.Options
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager registers the rotator, and has it look once at start.
func (r *Rotator) SetupWithManager(mgr ctrl.Manager) error {
	isCA := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Key.Namespace && o.GetName() == r.Key.Name
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(RotatorName).
		For(&corev1.Secret{}, builder.WithPredicates(isCA)).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(reconcile.Request{NamespacedName: r.Key})
			return nil
		})).
		Complete(r)
}

// Reconcile makes, repairs or rotates the CA, and comes back when the next
// rotation is due.
func (r *Rotator) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, r.Key, sec)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	var current pki.Authority
	if exists {
		current, err = Decode(sec)
		if err != nil {
			// A CA nobody can use is replaced: the fleets get new
			// certificates from the new one.
			log.Error(err, "the xDS CA Secret cannot be read; making a new CA", "secret", r.Key)
			current = pki.Authority{}
		}
	}
	next, changed, err := pki.Rotate(current, now, r.Options)
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		want, err := Secret(r.Key, next)
		if err != nil {
			return reconcile.Result{}, err
		}
		if exists {
			sec.Data = want.Data
			sec.Labels = objects.MergeMaps(sec.Labels, want.Labels)
			err = r.Client.Update(ctx, sec)
		} else {
			err = r.Client.Create(ctx, want)
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("writing the xDS CA Secret %s: %w", r.Key, err)
		}
		log.Info("xDS certificate authority rotated", "secret", r.Key, "trusted", len(next.CAs),
			"newest", next.CAs[0].Cert.NotBefore, "expires", next.CAs[0].Cert.NotAfter)
	}
	return reconcile.Result{RequeueAfter: max(time.Until(pki.NextRotation(next)), time.Second)}, nil
}
