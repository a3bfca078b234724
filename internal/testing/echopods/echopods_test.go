package echopods_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/echopods"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var cs kubernetes.Interface

func TestMain(m *testing.M) { testenv.MainClientset(m, &cs) }

// require returns echo-basic's path, or skips the test where it or root is
// missing (fails it under CI).
func require(t *testing.T) string {
	t.Helper()
	bin, err := echopods.Binary()
	if err == nil {
		err = podnet.Root()
	}
	testenv.Require(t, err)
	return bin
}

// echoed is what echo-basic answers, the part the conformance suite reads.
type echoed struct {
	Path      string `json:"path"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
}

// The suite's TLS backend, as its manifests have it: the Secret's keys
// mounted by items, the environment naming them, the pod's name and
// namespace from fieldRef. It answers HTTP and HTTPS at its address as
// itself, and once the pod is gone, its process and namespace are gone.
func TestEchoPod(t *testing.T) {
	bin := require(t)
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "echo-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crt, key := certificate(t)
	if _, err := cs.CoreV1().Secrets(ns.Name).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls-checks-certificate"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": crt, "tls.key": key}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	pod, err := cs.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tls-backend-5d8f7-abcde"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "tls-backend", Image: "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
				VolumeMounts: []corev1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume"}},
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: field("metadata.name")}, {Name: "NAMESPACE", ValueFrom: field("metadata.namespace")},
					{Name: "TLS_SERVER_CERT", Value: "/etc/secret-volume/crt"}, {Name: "TLS_SERVER_PRIVKEY", Value: "/etc/secret-volume/key"}}}},
			Volumes: []corev1.Volume{{Name: "secret-volume", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "tls-checks-certificate", Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "crt"}, {Key: "tls.key", Path: "key"}}}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.252.1", PodIPs: []corev1.PodIP{{IP: "10.0.252.1"}}}
	if _, err := cs.CoreV1().Pods(ns.Name).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := &echopods.Runner{Client: cs, Namespace: ns.Name, Binary: bin, Dir: t.TempDir()}
	t.Cleanup(func() {
		if err := r.StopAll(); err != nil {
			t.Error(err)
		}
	})
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	name := ns.Name + "/" + pod.Name
	if got := r.Addresses()[name]; got != "10.0.252.1" {
		t.Fatalf("Addresses()[%s] = %q", name, got)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test's own certificate
	for _, url := range []string{"http://10.0.252.1:3000/a/path", "https://10.0.252.1:8443/a/path"} {
		testenv.Eventually(t, "echo-basic to answer at "+url, func() (bool, error) {
			resp, err := client.Get(url)
			if err != nil {
				return false, err
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return false, err
			}
			var got echoed
			if err := json.Unmarshal(body, &got); err != nil {
				return false, testenv.Unexpected("%s: %v: %s", url, err, body)
			}
			if want := (echoed{Path: "/a/path", Namespace: ns.Name, Pod: pod.Name}); got != want {
				return false, testenv.Unexpected("%s answered %+v, want %+v", url, got, want)
			}
			return true, nil
		})
	}

	if err := cs.CoreV1().Pods(ns.Name).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "echo-basic stopped and the pod's namespace gone", func() (bool, error) {
		if err := r.Sync(ctx); err != nil {
			return false, testenv.Unexpected("Sync: %v", err)
		}
		netns, _ := podnet.PodNames(ns.Name, pod.Name, pod.Status.PodIP)
		_, err := os.Stat(filepath.Join("/run/netns", netns))
		return len(r.Addresses()) == 0 && os.IsNotExist(err), nil
	})
}

// certificate is a self-signed certificate and its key, in PEM.
func certificate(t *testing.T) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example.com"},
		DNSNames: []string{"example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}
