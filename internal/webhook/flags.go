package webhook

import (
	"cmp"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/certificates"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/validate"
)

// Flags are the command-line settings of the webhook.
type Flags struct {
	BindAddress             string
	CertDir                 string
	CertRotation            bool
	CertSecret              string
	CertDNSName             string
	CertWriteFiles          bool
	WebhookConfiguration    string
	ValidatingConfiguration string
	Namespace               string
}

// DefaultNamespace is the operator's namespace when POD_NAMESPACE does not say.
const DefaultNamespace = "kube-envoy-controller"

// BindFlags registers the webhook's flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.BindAddress, "webhook-bind-address", "0", "host:port of the sidecar-injection webhook's HTTPS server (:9443 in config/default); 0 disables the webhook.")
	fs.StringVar(&f.CertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory of the webhook server's tls.crt and tls.key.")
	fs.BoolVar(&f.CertRotation, "webhook-cert-rotation", true,
		"Generate and rotate the webhook's CA and serving certificate in the Secret --webhook-cert-secret, and put the CA into the webhook configuration's caBundle. "+
			"false: the certificate in --webhook-cert-dir and the caBundle come from elsewhere, such as cert-manager (config/webhook/kustomization.yaml says how).")
	fs.StringVar(&f.CertSecret, "webhook-cert-secret", "kube-envoy-controller-webhook-cert", "Secret, in the operator's namespace, that holds the generated CA and certificate.")
	fs.StringVar(&f.CertDNSName, "webhook-cert-dns-name", "", "DNS name of the generated certificate: how the API server reaches the webhook. Defaults to kube-envoy-controller-webhook.<namespace>.svc.")
	fs.BoolVar(&f.CertWriteFiles, "webhook-cert-write-files", false, "Copy the generated certificate from its Secret into --webhook-cert-dir, for an operator that runs outside the cluster, where no kubelet mounts the Secret.")
	fs.StringVar(&f.WebhookConfiguration, "webhook-configuration", "kube-envoy-controller-injector", "MutatingWebhookConfiguration that gets the generated CA as caBundle.")
	fs.StringVar(&f.ValidatingConfiguration, "validating-webhook-configuration", validate.Configuration, "ValidatingWebhookConfiguration that gets the generated CA as caBundle.")
	fs.StringVar(&f.Namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), DefaultNamespace), "The operator's own namespace: its pods are never injected; it holds the webhook's certificate Secret, the fleets' revision histories and the replicas' reports of their xDS proxies. Defaults to $POD_NAMESPACE, else "+DefaultNamespace+".")
	return f
}

// Enabled reports whether the webhook runs.
func (f *Flags) Enabled() bool { return f.BindAddress != "0" }

// Server returns the webhook server's host and port.
func (f *Flags) Server() (string, int, error) {
	host, portStr, err := net.SplitHostPort(f.BindAddress)
	if err != nil {
		return "", 0, fmt.Errorf("--webhook-bind-address %q: %w", f.BindAddress, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("--webhook-bind-address %q: want host:port with a port in 1..65535", f.BindAddress)
	}
	return host, int(port), nil
}

// WebhookDNSName is the name the API server reaches the webhook at.
func (f *Flags) WebhookDNSName() string {
	return cmp.Or(f.CertDNSName, "kube-envoy-controller-webhook."+f.Namespace+".svc")
}

// Options returns the webhook's Options.
func (f *Flags) Options() Options {
	o := Options{Namespace: f.Namespace}
	if f.CertRotation {
		o.Certs = &certificates.Options{
			Dir:                     f.CertDir,
			SecretName:              f.CertSecret,
			DNSName:                 f.WebhookDNSName(),
			WebhookConfiguration:    f.WebhookConfiguration,
			ValidatingConfiguration: f.ValidatingConfiguration,
			WriteFiles:              f.CertWriteFiles,
		}
	}
	return o
}
