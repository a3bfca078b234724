package authority

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// PublisherName is the publisher's controller name in logs and metrics.
const PublisherName = "xds-ca-publisher"

// DefaultConfigMapName is the ConfigMap, in the operator's namespace, that
// holds the trusted CA certificates (public part only, under BundleKey):
// clients of the operator's debug endpoint verify its certificate with them.
// internal/names holds the name, for kubectl envoy, which does not link this
// package.
const DefaultConfigMapName = names.CAConfigMap

// Publisher copies the CA Secret's certificates, and nothing else, into a
// ConfigMap that anyone allowed may read, whoever keeps the Secret (the
// Rotator or cert-manager). It runs on the leader only and writes only when
// the certificates changed: a settled operator writes nothing.
type Publisher struct {
	// Client reads the CA Secret and the ConfigMap from the cache (the
	// ConfigMap carries the operator's managed-by label, so it is cached)
	// and writes the ConfigMap.
	Client client.Client
	// APIReader reads the ConfigMap when the cache does not have it.
	APIReader client.Reader
	// Secret is the CA Secret, and ConfigMap the ConfigMap to write.
	Secret, ConfigMap types.NamespacedName
}

// SetupWithManager registers the publisher: it looks again when the CA
// Secret or the ConfigMap changes.
func (p *Publisher) SetupWithManager(mgr ctrl.Manager) error {
	named := func(key types.NamespacedName) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == key.Namespace && o.GetName() == key.Name
		})
	}
	toSecret := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: p.Secret}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(PublisherName).
		For(&corev1.Secret{}, builder.WithPredicates(named(p.Secret))).
		Watches(&corev1.ConfigMap{}, toSecret, builder.WithPredicates(named(p.ConfigMap))).
		Complete(p)
}

// Reconcile writes the CA certificates into the ConfigMap when they differ
// from what it holds.
func (p *Publisher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	sec := &corev1.Secret{}
	if err := p.Client.Get(ctx, p.Secret, sec); err != nil {
		// No CA yet: the Secret's creation brings us back.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	a, err := Decode(sec)
	if err != nil || a.Empty() {
		// The Rotator (or whoever keeps the Secret) repairs it; what is
		// published stays until then.
		ctrl.LoggerFrom(ctx).Info("the xDS CA Secret holds no CA; the published certificates stay", "secret", p.Secret, "error", err)
		return reconcile.Result{}, nil
	}
	want := PublishedConfigMap(p.ConfigMap, a.Bundle())

	cm := &corev1.ConfigMap{}
	err = p.Client.Get(ctx, p.ConfigMap, cm)
	if apierrors.IsNotFound(err) {
		// Not in the cache: it does not exist, or lost its label.
		err = p.APIReader.Get(ctx, p.ConfigMap, cm)
	}
	switch {
	case apierrors.IsNotFound(err):
		err = p.Client.Create(ctx, want)
	case err != nil:
		return reconcile.Result{}, err
	case cm.Data[BundleKey] == want.Data[BundleKey] && len(cm.Data) == 1 && cm.Labels[names.ManagedByLabel] == names.ManagedByValue:
		return reconcile.Result{}, nil
	default:
		cm.Data = want.Data
		cm.Labels = objects.MergeMaps(cm.Labels, want.Labels)
		err = p.Client.Update(ctx, cm)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("publishing the xDS CA certificates in ConfigMap %s: %w", p.ConfigMap, err)
	}
	ctrl.LoggerFrom(ctx).Info("xDS CA certificates published", "configMap", p.ConfigMap, "trusted", len(a.CAs))
	return reconcile.Result{}, nil
}

// PublishedConfigMap is the ConfigMap that publishes bundle, PEM CA certificates.
func PublishedConfigMap(key types.NamespacedName, bundle []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
		},
		Data: map[string]string{BundleKey: string(bundle)},
	}
}
