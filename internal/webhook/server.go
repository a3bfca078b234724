package webhook

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/certificates"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/inject"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/podtemplate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/validate"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Options configure the webhook.
type Options struct {
	// Namespace is the operator's own namespace. Its pods are never injected,
	// and it holds the Secret with the webhook's certificate.
	Namespace string
	// Certs, when set, has the operator generate and rotate the serving
	// certificate and its CA. Without it the certificate in the webhook
	// server's directory comes from elsewhere (cert-manager, say), and so
	// does the webhook configuration's caBundle.
	Certs *certificates.Options
	// Fleet is the operator's fleet defaults: how injected Envoy sidecars
	// reach the built-in xDS server.
	Fleet fleet.Defaults
	// Policy is the content policy that the EnvoyConfig validator applies;
	// its Namespace is Namespace when not set.
	Policy translate.Policy
	// Envoy is the real Envoy the EnvoyConfig validator loads what the
	// rules admit in (validate.EnvoyConfigValidator).
	Envoy *envoyjudge.Judge
}

// Setup registers the injector, the EnvoyConfig validator and the Watcher,
// PodSet and Envoy validators on mgr's webhook server. With certificate
// rotation the server starts only once its certificate is in place and the
// CA is in the webhook configuration; until then the readiness check fails.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Policy.Namespace == "" {
		o.Policy.Namespace = o.Namespace
	}
	hook, err := inject.NewWebhook(mgr, o.Namespace, o.Fleet)
	if err != nil {
		return err
	}
	validator := validate.NewWebhook(mgr, o.Policy, o.Envoy)
	watchers, podSets, envoys := podtemplate.NewWatcherWebhook(mgr), podtemplate.NewPodSetWebhook(mgr), podtemplate.NewEnvoyWebhook(mgr)
	register := func() {
		mgr.GetWebhookServer().Register(inject.Path, hook)
		mgr.GetWebhookServer().Register(validate.Path, validator)
		mgr.GetWebhookServer().Register(podtemplate.WatcherPath, watchers)
		mgr.GetWebhookServer().Register(podtemplate.PodSetPath, podSets)
		mgr.GetWebhookServer().Register(podtemplate.EnvoyPath, envoys)
	}
	if o.Certs == nil {
		register()
		return mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker())
	}
	return certificates.Add(mgr, o.Namespace, *o.Certs, register)
}
