// Package manager builds the operator's controller-runtime manager: its
// scheme, its trimmed cache and its servers. The binary and every integration
// test build their manager here, so that tests run what production runs.
package manager

import (
	"cmp"
	"crypto/tls"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
)

// Options are the manager settings that come from the command line.
type Options struct {
	MetricsAddr string // "0" disables the metrics server
	// MetricsSecure serves /metrics over HTTPS, to clients that authenticate
	// with a token and are authorized for GET /metrics (TokenReview and
	// SubjectAccessReview against the API server).
	MetricsSecure           bool
	ProbeAddr               string // "" or "0" disables the health probes
	PprofAddr               string // "" or "0" disables Go's /debug/pprof endpoints
	LeaderElect             bool
	LeaderElectionNamespace string
	// LeaderElection times the Lease; zero fields take DefaultLeaderElection's.
	LeaderElection LeaderElection
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

// LeaderElection are the leader election's times, as kube-controller-manager's
// --leader-elect-* flags.
type LeaderElection struct {
	// LeaseDuration is how long a standby waits, after it last saw the
	// Lease renewed, before it takes the Lease over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up leading (and the process exits).
	RenewDeadline time.Duration
	// RetryPeriod is how often the leader renews and the standbys look.
	RetryPeriod time.Duration
}

// DefaultLeaderElection: a standby takes over from a leader that died
// without giving the Lease up within LeaseDuration plus up to two retry
// periods (each with up to 20% jitter): at most about 17 s. A leader that
// stops gives the Lease up, and a standby takes over within a retry period.
// client-go's defaults (15 s, 10 s, 2 s) allow about 20 s.
var DefaultLeaderElection = LeaderElection{LeaseDuration: 12 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second}

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
		Client:                  client.Options{FieldOwner: names.FieldOwner},
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  probe,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Step down at once on SIGTERM, so that the next leader need not wait for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(cmp.Or(o.LeaderElection.LeaseDuration, DefaultLeaderElection.LeaseDuration)),
		RenewDeadline:                 ptr.To(cmp.Or(o.LeaderElection.RenewDeadline, DefaultLeaderElection.RenewDeadline)),
		RetryPeriod:                   ptr.To(cmp.Or(o.LeaderElection.RetryPeriod, DefaultLeaderElection.RetryPeriod)),
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    o.WebhookHost,
			Port:    o.WebhookPort,
			CertDir: o.WebhookCertDir,
			TLSOpts: []func(*tls.Config){http1Only},
		}),
	})
}

// HTTP/1.1 only: HTTP/2 lets a client reset streams that cost the server more
// than the client (CVE-2023-44487).
func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// The metrics server's authentication and authorization filter asks the API
// server about each scraper's token.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves /metrics plainly, or, with MetricsSecure, over HTTPS
// (a self-signed certificate) to scrapers whose token may GET /metrics.
func metricsOptions(o Options) metricsserver.Options {
	if !o.MetricsSecure {
		return metricsserver.Options{BindAddress: o.MetricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.MetricsAddr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        []func(*tls.Config){http1Only},
	}
}

// CacheOptions trims the manager's cache: managedFields are dropped from every
// object, and of the kinds the operator creates, only the objects it labelled
// as its own are cached. A clash with a foreign object of the same name is
// found by its create failing, not by caching every object in the cluster.
// Of Secrets, only those labelled for the xDS control plane are cached
// (names.XDSSecretLabel): no other Secret's data is ever in memory.
func CacheOptions() cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{names.ManagedByLabel: names.ManagedByValue})}
	xdsSecrets, err := labels.NewRequirement(names.XDSSecretLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key: cannot fail
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:                     owned,
			&corev1.Service{}:                        owned,
			&corev1.ConfigMap{}:                      owned,
			&corev1.Pod{}:                            owned,
			&batchv1.Job{}:                           owned,
			&policyv1.PodDisruptionBudget{}:          owned,
			&autoscalingv2.HorizontalPodAutoscaler{}: owned,
			&networkingv1.NetworkPolicy{}:            owned,
			&corev1.Secret{}:                         {Label: labels.NewSelector().Add(*xdsSecrets)},
		},
	}
}
