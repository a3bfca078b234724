package certificates

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
)

// The operator reads and writes one Secret, the webhook's certificate in its
// own namespace, and puts the CA into its two webhook configurations: every
// rule names its objects (resourceNames). list and watch are authorized by
// resourceNames only for requests whose field selector picks that one name,
// so the rotator's requests carry one (narrowTo). create cannot be
// limited by name; the operator creates the Secret when it is missing (on
// the host; config/default ships it).
//
// +kubebuilder:rbac:groups="",namespace=kube-envoy-controller,resources=secrets,resourceNames=kube-envoy-controller-webhook-cert,verbs=get;list;watch;update
// +kubebuilder:rbac:groups="",namespace=kube-envoy-controller,resources=secrets,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=kube-envoy-controller-injector,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=kube-envoy-controller-validator,verbs=get;list;watch;update

// Options configure the certificate rotation.
type Options struct {
	// Dir is the webhook server's certificate directory: tls.crt and tls.key.
	Dir string
	// SecretName is the Secret, in the operator's namespace, that holds the
	// CA and the serving certificate. In a cluster it is mounted at Dir.
	SecretName string
	// DNSName is the name the API server calls the webhook by: the Service's
	// <name>.<namespace>.svc in a cluster, localhost for an operator on the host.
	DNSName string
	// WebhookConfiguration is the MutatingWebhookConfiguration whose webhooks
	// get the CA as caBundle.
	WebhookConfiguration string
	// ValidatingConfiguration is the ValidatingWebhookConfiguration whose
	// webhooks get the CA as caBundle.
	ValidatingConfiguration string
	// WriteFiles has the operator copy the certificate from the Secret into
	// Dir itself, for an operator outside the cluster where no kubelet mounts
	// the Secret.
	WriteFiles bool

	// ControllerName names the rotator's controller: "webhook-cert-rotator"
	// unless set. Controller names are unique in a process; a process that
	// starts the operator more than once gives each start its own.
	ControllerName string
}

// Names of the Secret's keys that the webhook server reads.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// Add has mgr keep the webhook's certificate, in the Secret o.SecretName of
// namespace, and start the webhook server only once it is in place. register
// registers the webhooks on mgr's webhook server, and so has the manager start
// it: every replica, leader or not, calls it once the certificate is in o.Dir
// and the CA is in both webhook configurations. Until then the readiness
// check "webhook" fails.
func Add(mgr ctrl.Manager, namespace string, o Options, register func()) error {
	ready, err := addRotator(mgr, namespace, o)
	if err != nil {
		return err
	}
	// The webhook server is added to the manager, and so started, on its
	// first use: after the certificate exists.
	if err := mgr.Add(background(func(ctx context.Context) error {
		select {
		case <-ready:
			register()
		case <-ctx.Done():
		}
		return nil
	})); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		select {
		case <-ready:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("the webhook's certificate is not ready yet")
		}
	})
}

// background is a runnable that every replica runs, leader or not.
type background func(ctx context.Context) error

func (b background) Start(ctx context.Context) error { return b(ctx) }
func (b background) NeedLeaderElection() bool        { return false }

// String names the runnable in the manager's logs.
func (b background) String() string { return fmt.Sprintf("webhook setup %p", b) }

// addRotator adds open-policy-agent/cert-controller's rotator to mgr: it
// keeps a CA and a serving certificate for o.DNSName in the Secret, renews them
// before they expire and injects the CA into the webhook configuration. The
// returned channel closes once the certificate is in o.Dir and the CA injected.
func addRotator(mgr ctrl.Manager, namespace string, o Options) (<-chan struct{}, error) {
	key := types.NamespacedName{Namespace: namespace, Name: o.SecretName}
	// The rotator fills the Secret but does not create it.
	if err := ensureSecret(mgr, key); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	narrowed := narrowTo(mgr, map[string]string{
		collectionPath("", "v1", namespace, "secrets"):                                              o.SecretName,
		collectionPath("admissionregistration.k8s.io", "v1", "", "mutatingwebhookconfigurations"):   o.WebhookConfiguration,
		collectionPath("admissionregistration.k8s.io", "v1", "", "validatingwebhookconfigurations"): o.ValidatingConfiguration,
	})
	if err := rotator.AddRotator(narrowed, &rotator.CertRotator{
		SecretKey:      key,
		CertDir:        o.Dir,
		CAName:         "kube-envoy-controller-webhook-ca",
		CAOrganization: "kube-envoy-controller",
		DNSName:        o.DNSName,
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.WebhookConfiguration, Type: rotator.Mutating},
			{Name: o.ValidatingConfiguration, Type: rotator.Validating},
		},
		FieldOwner: names.FieldOwner,
		// Every replica serves the webhook, so every replica needs the certificate.
		RequireLeaderElection: false,
		ControllerName:        cmp.Or(o.ControllerName, "webhook-cert-rotator"),
	}); err != nil {
		return nil, fmt.Errorf("adding the webhook certificate rotator: %w", err)
	}
	if o.WriteFiles {
		if err := addCertWriter(mgr, key, o.Dir); err != nil {
			return nil, err
		}
	}
	return ready, nil
}

// ensureSecret creates the empty Secret the rotator fills, unless it exists
// (a restart sends no write).
func ensureSecret(mgr ctrl.Manager, key types.NamespacedName) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	if err := c.Get(context.Background(), key, &corev1.Secret{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the webhook certificate Secret %s: %w", key, err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue},
		},
		Type: corev1.SecretTypeOpaque,
	}
	err = c.Create(context.Background(), s, client.FieldOwner(names.FieldOwner))
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook certificate Secret %s: %w", key, err)
	}
	return nil
}

// addCertWriter copies tls.crt, tls.key and ca.crt from the Secret into dir
// whenever they change, as the kubelet does for a mounted Secret. The webhook
// server reloads them.
func addCertWriter(mgr ctrl.Manager, key types.NamespacedName, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("webhook certificate directory: %w", err)
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{key.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", key.Name)},
		},
	})
	if err != nil {
		return err
	}
	informer, err := c.GetInformer(context.Background(), &corev1.Secret{})
	if err != nil {
		return err
	}
	log := logf.Log.WithName("webhook-cert-writer")
	write := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || len(s.Data[certFile]) == 0 || len(s.Data[keyFile]) == 0 {
			return
		}
		// The key first: the server reloads when the certificate changes.
		for _, name := range []string{keyFile, caFile, certFile} {
			if err := writeIfChanged(filepath.Join(dir, name), s.Data[name]); err != nil {
				log.Error(err, "writing the webhook certificate", "file", name)
				return
			}
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    write,
		UpdateFunc: func(_, obj any) { write(obj) },
	}); err != nil {
		return err
	}
	return mgr.Add(background(c.Start))
}

// writeIfChanged replaces path with data, atomically, unless it holds data already.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
