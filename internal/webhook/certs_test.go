package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/inject"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/validate"
)

// These tests run a second operator beside the suite's, configured by the
// webhook's command-line flags, with its own copies of the generated webhook
// configurations: their webhooks call that operator, at
// https://localhost:<port>, for the namespaces labelled scopeLabel=<name>.

const scopeLabel = "test.kube-envoy-controller.io/webhook-copy"

// edsCluster is a cluster that the validator admits.
const edsCluster = `{"name": "backend", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`

// The keys of the certificate Secret: the serving certificate, its key and
// the CA, as the webhook server reads them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// freePort returns a local TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// scopedNamespace creates a namespace that the copies named name serve. It
// opts in to injection, which the injector checks itself; the suite's own
// configuration sends its pods too, but only after the copies.
func scopedNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := suite.Namespace(t)
	n := &corev1.Namespace{}
	if err := suite.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	n.Labels[scopeLabel] = name
	n.Labels[inject.NamespaceLabel] = inject.NamespaceEnabled
	if err := suite.Client.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return ns
}

// installCopies installs copies of the generated mutating and validating
// configurations, named copy-name-injector and copy-name-validator, whose
// webhooks call https://localhost:port with caBundle, for the namespaces
// labelled scopeLabel=name. The API server calls mutating configurations in
// the order of their names: the copy before the suite's injector. They are
// deleted when the test ends.
func installCopies(t *testing.T, name string, port int, caBundle []byte) (mutating, validating string) {
	t.Helper()
	ctx := context.Background()
	hooks, validators, err := testenv.WebhookManifests()
	if err != nil {
		t.Fatal(err)
	}
	// retarget renames a webhook and points it at the operator, for the
	// namespaces in scope.
	retarget := func(hook *string, cc *admissionv1.WebhookClientConfig, scope **metav1.LabelSelector) {
		*hook = name + "." + *hook
		url := "https://localhost:" + strconv.Itoa(port) + *cc.Service.Path
		*cc = admissionv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
		*scope = &metav1.LabelSelector{MatchLabels: map[string]string{scopeLabel: name}}
	}
	m := hooks[0].DeepCopy()
	m.ObjectMeta = metav1.ObjectMeta{Name: "copy-" + name + "-injector"}
	for i := range m.Webhooks {
		w := &m.Webhooks[i]
		retarget(&w.Name, &w.ClientConfig, &w.NamespaceSelector)
	}
	v := validators[0].DeepCopy()
	v.ObjectMeta = metav1.ObjectMeta{Name: "copy-" + name + "-validator"}
	for i := range v.Webhooks {
		w := &v.Webhooks[i]
		retarget(&w.Name, &w.ClientConfig, &w.NamespaceSelector)
	}
	for _, obj := range []client.Object{m, v} {
		if err := suite.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := suite.Client.Delete(ctx, obj); err != nil {
				t.Error(err)
			}
		})
	}
	return m.Name, v.Name
}

// caBundles returns the caBundle of every webhook of the named configurations.
func caBundles(t *testing.T, mutating, validating string) [][]byte {
	t.Helper()
	ctx := context.Background()
	m := &admissionv1.MutatingWebhookConfiguration{}
	v := &admissionv1.ValidatingWebhookConfiguration{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Name: mutating}, m); err != nil {
		t.Fatal(err)
	}
	if err := suite.Client.Get(ctx, client.ObjectKey{Name: validating}, v); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, w := range m.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

// allEqual reports whether every bundle is want.
func allEqual(bundles [][]byte, want []byte) bool {
	for _, b := range bundles {
		if !bytes.Equal(b, want) {
			return false
		}
	}
	return len(bundles) > 0
}

// rotators numbers the certificate rotators the tests start, whose
// controllers need names of their own.
var rotators atomic.Int32

// operator is a second operator: a manager with the webhook set up from the
// command line args. Writes counts its write requests.
type operator struct {
	Manager ctrl.Manager
	Writes  *testenv.RequestCounter
}

// startOperator parses args as the binary's webhook flags and starts a
// manager with the webhook they configure. It stops when the test ends.
func startOperator(t *testing.T, args ...string) *operator {
	t.Helper()
	fs := flag.NewFlagSet("kube-envoy-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	host, port, err := f.Server()
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{Writes: &testenv.RequestCounter{}}
	op.Manager, err = manager.New(op.Writes.Wrap(suite.Manager.GetConfig()), manager.Options{
		MetricsAddr: "0", WebhookHost: host, WebhookPort: port, WebhookCertDir: f.CertDir, PanicOnReconcilePanic: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := f.Options()
	if opts.Certs != nil {
		opts.Certs.ControllerName = fmt.Sprintf("webhook-cert-rotator-%d", rotators.Add(1))
	}
	if err := Setup(op.Manager, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := op.Manager.Start(ctx); err != nil {
			t.Errorf("operator: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return op
}

// expectAdmission waits until the copies named for ns call the operator
// that serves them, with a TLS connection the API server trusts: a pod that
// names a missing Watcher is refused by the injector, and a valid
// EnvoyConfig is admitted by the validator. Both have failurePolicy Fail, so
// an untrusted or absent server fails both requests.
func expectAdmission(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Namespace{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	copied := `admission webhook "` + n.Labels[scopeLabel] + `.inject.watch.my.domain" denied the request`
	testenv.Eventually(t, "the copied webhooks to serve namespace "+ns, func() (bool, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "app-", Namespace: ns, Annotations: map[string]string{inject.InjectAnnotation: "no-such-watcher"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
		}
		err := suite.Client.Create(ctx, pod)
		if err == nil {
			return false, nil
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), copied) || !strings.Contains(err.Error(), `Watcher "no-such-watcher", which does not exist`) {
			return false, err
		}
		cfg := &examplev1.EnvoyConfig{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "valid-", Namespace: ns},
			Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{
				Clusters: []runtime.RawExtension{{Raw: []byte(edsCluster)}},
			}},
		}
		return true, suite.Client.Create(ctx, cfg)
	})
}

// secretCA waits until the operator's Secret holds a serving certificate,
// its key and a CA certificate other than unlike, and returns the CA.
func secretCA(t *testing.T, ns, name string, unlike []byte) []byte {
	t.Helper()
	s := testenv.WaitFor(t, suite.Client, ns, name, &corev1.Secret{}, func(s *corev1.Secret) bool {
		ca := s.Data[caFile]
		return isCA(ca) && !bytes.Equal(ca, unlike) && len(s.Data[certFile]) > 0 && len(s.Data[keyFile]) > 0
	})
	return s.Data[caFile]
}

// isCA reports whether data is a PEM-encoded CA certificate.
func isCA(data []byte) bool {
	block, _ := pem.Decode(data)
	if block == nil {
		return false
	}
	c, err := x509.ParseCertificate(block.Bytes)
	return err == nil && c.IsCA
}

// With rotation (the default), the operator generates the CA and the
// serving certificate in its Secret, puts the CA into the caBundle of both
// webhook configurations, and serves with that certificate. A CA that is no
// longer valid is replaced: a new CA and certificate, in the Secret, both
// caBundles and the server. A caBundle changed by hand is put back.
func TestCertRotation(t *testing.T) {
	ctx := context.Background()
	operatorNS := suite.Namespace(t)
	appNS := scopedNamespace(t, "rotated")
	port := freePort(t)
	mutating, validating := installCopies(t, "rotated", port, nil)
	const secret = "webhook-cert"
	op := startOperator(t,
		"--webhook-bind-address", "127.0.0.1:"+strconv.Itoa(port),
		"--webhook-cert-dir", t.TempDir(),
		"--webhook-cert-dns-name", "localhost",
		"--webhook-cert-write-files",
		"--webhook-cert-secret", secret,
		"--namespace", operatorNS,
		"--webhook-configuration", mutating,
		"--validating-webhook-configuration", validating,
	)

	ca := secretCA(t, operatorNS, secret, nil)
	testenv.Eventually(t, "the CA in both configurations", func() (bool, error) {
		return allEqual(caBundles(t, mutating, validating), ca), nil
	})
	testenv.WaitServing(t, op.Manager)
	expectAdmission(t, appNS)

	// The CA in the Secret is corrupted: the operator renews both.
	s := &corev1.Secret{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: secret}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[caFile] = []byte("not a certificate")
	if err := suite.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	renewed := secretCA(t, operatorNS, secret, ca)
	testenv.Eventually(t, "the renewed CA in both configurations", func() (bool, error) {
		return allEqual(caBundles(t, mutating, validating), renewed), nil
	})
	expectAdmission(t, appNS)

	// A caBundle changed by hand is put back.
	v := &admissionv1.ValidatingWebhookConfiguration{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Name: validating}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks[0].ClientConfig.CABundle = []byte("stale")
	if err := suite.Client.Update(ctx, v); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the caBundle put back", func() (bool, error) {
		return allEqual(caBundles(t, mutating, validating), renewed), nil
	})
}

// --webhook-cert-rotation=false: the certificate and the caBundle come from
// elsewhere (here, envtest's). The operator serves with the certificate in
// --webhook-cert-dir, writes no Secret and leaves the caBundles alone.
func TestNoCertRotation(t *testing.T) {
	ctx := context.Background()
	// envtest's CA, as the suite's configurations carry it, stands for cert-manager's.
	installed := &admissionv1.ValidatingWebhookConfiguration{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Name: validate.Configuration}, installed); err != nil {
		t.Fatal(err)
	}
	externalCA := installed.Webhooks[0].ClientConfig.CABundle
	certDir := suite.Manager.GetWebhookServer().(*ctrlwebhook.DefaultServer).Options.CertDir
	if len(externalCA) == 0 || certDir == "" {
		t.Fatalf("no envtest certificate (caBundle %d bytes, directory %q)", len(externalCA), certDir)
	}

	operatorNS := suite.Namespace(t)
	appNS := scopedNamespace(t, "external")
	port := freePort(t)
	mutating, validating := installCopies(t, "external", port, externalCA)
	op := startOperator(t,
		"--webhook-cert-rotation=false",
		"--webhook-bind-address", "127.0.0.1:"+strconv.Itoa(port),
		"--webhook-cert-dir", certDir,
		"--webhook-cert-dns-name", "localhost",
		"--webhook-cert-write-files",
		"--namespace", operatorNS,
		"--webhook-configuration", mutating,
		"--validating-webhook-configuration", validating,
	)
	// With rotation, the server would start only after the caBundles were
	// patched: once it serves, a rotator would have written them.
	testenv.WaitServing(t, op.Manager)
	expectAdmission(t, appNS)

	if w := op.Writes.Writes(); len(w) != 0 {
		t.Errorf("the operator sent write requests: %v", w)
	}
	err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "kube-envoy-controller-webhook-cert"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the certificate Secret: got %v, want NotFound", err)
	}
	if !allEqual(caBundles(t, mutating, validating), externalCA) {
		t.Error("the caBundles changed")
	}
}

// An operator started again, with its certificate in the Secret and its CA
// in both configurations, sends no write request: it finds the Secret and
// leaves the caBundles, which hold the CA already, alone.
func TestRestartWritesNothing(t *testing.T) {
	operatorNS := suite.Namespace(t)
	appNS := scopedNamespace(t, "restarted")
	port := freePort(t)
	mutating, validating := installCopies(t, "restarted", port, nil)
	args := []string{
		"--webhook-bind-address", "127.0.0.1:" + strconv.Itoa(port),
		"--webhook-cert-dir", t.TempDir(),
		"--webhook-cert-dns-name", "localhost",
		"--webhook-cert-write-files",
		"--namespace", operatorNS,
		"--webhook-configuration", mutating,
		"--validating-webhook-configuration", validating,
	}
	var ca []byte
	t.Run("first start", func(t *testing.T) { // the operator stops when it ends
		op := startOperator(t, args...)
		ca = secretCA(t, operatorNS, "kube-envoy-controller-webhook-cert", nil)
		testenv.Eventually(t, "the CA in both configurations", func() (bool, error) {
			return allEqual(caBundles(t, mutating, validating), ca), nil
		})
		testenv.WaitServing(t, op.Manager)
		expectAdmission(t, appNS)
		if len(op.Writes.Writes()) == 0 {
			t.Fatal("the first start sent no write request: the counter counts nothing")
		}
	})
	op := startOperator(t, args...)
	// It serves once the rotator has looked at the Secret and the configurations.
	testenv.WaitServing(t, op.Manager)
	expectAdmission(t, appNS)
	if w := op.Writes.Writes(); len(w) != 0 {
		t.Errorf("the restarted operator sent write requests: %v", w)
	}
	if !allEqual(caBundles(t, mutating, validating), ca) {
		t.Error("the caBundles changed")
	}
}
