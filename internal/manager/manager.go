// Package manager builds the operator's controller-runtime manager: its
// scheme, its trimmed cache and its servers. The binary and every integration
// test build their manager here, so that tests run what production runs.
package manager

import (
	"cmp"
	"crypto/tls"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// Options are the manager settings that come from the command line.
type Options struct {
	MetricsAddr             string // "0" disables the metrics server
	ProbeAddr               string // "" or "0" disables the health probes
	PprofAddr               string // "" or "0" disables Go's /debug/pprof endpoints
	LeaderElect             bool
	LeaderElectionNamespace string
	// WebhookHost, WebhookPort and WebhookCertDir configure the webhook
	// server (tls.crt and tls.key in WebhookCertDir). It starts only when a
	// webhook is registered on it.
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// ConcurrentReconciles is how many objects each controller reconciles at
	// once, unless the controller sets its own; 0 means DefaultConcurrentReconciles.
	ConcurrentReconciles int
	// PanicOnReconcilePanic lets a panic in a reconcile crash the process
	// instead of being recovered and logged as an error: tests set it, so
	// that a panic fails them.
	PanicOnReconcilePanic bool
	// SkipControllerNameValidation lets several managers in one process run
	// controllers of the same name: tests that start replicas side by side.
	SkipControllerNameValidation bool
}

// DefaultConcurrentReconciles matches kube-controller-manager's default
// number of workers for Deployments and ReplicaSets.
const DefaultConcurrentReconciles = 5

// LeaderElectionID names the Lease that replicas of the operator compete for.
const LeaderElectionID = "kube-envoy-controller.kube-envoy-controller.io"

// New returns a manager for cfg. It does not start it.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	probe := o.ProbeAddr
	if probe == "" {
		probe = "0"
	}
	return ctrl.NewManager(cfg, ctrl.Options{
		Controller: ctrlconfig.Controller{
			MaxConcurrentReconciles: cmp.Or(o.ConcurrentReconciles, DefaultConcurrentReconciles),
			RecoverPanic:            ptr.To(!o.PanicOnReconcilePanic),
			SkipNameValidation:      ptr.To(o.SkipControllerNameValidation),
		},
		Scheme: NewScheme(),
		Cache:  CacheOptions(),
		// Every write names the operator as its field manager.
		Client:                  client.Options{FieldOwner: objects.FieldOwner},
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  probe,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Step down at once on SIGTERM, so that the next leader need not wait for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    o.WebhookHost,
			Port:    o.WebhookPort,
			CertDir: o.WebhookCertDir,
			// HTTP/1.1 only: HTTP/2 lets a client reset streams that cost the server more than the client (CVE-2023-44487).
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		}),
	})
}

// CacheOptions trims the manager's cache: managedFields are dropped from every
// object, and of the kinds the operator creates, only the objects it labelled
// as its own are cached. A clash with a foreign object of the same name is
// found by its create failing, not by caching every object in the cluster.
func CacheOptions() cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{objects.ManagedByLabel: objects.ManagedByValue})}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: owned,
			&corev1.Service{}:    owned,
			&corev1.ConfigMap{}:  owned,
			&corev1.Pod{}:        owned,
			&batchv1.Job{}:       owned,
		},
	}
}
