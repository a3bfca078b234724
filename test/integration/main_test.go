// Package integration tests the APIs as a program or a kubectl user sees them,
// against a real API server (envtest) with the project's CRDs and no
// operator: the generated typed clients (pkg/generated), and the CRDs' kubectl
// conventions (short names, the kec category, printer columns).
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/clientset/versioned"
)

var (
	cfg        *rest.Config
	kubeconfig string // a kubeconfig file for bin/kubectl
	kube       kubernetes.Interface
	clientset  versioned.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, err := testenv.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		// Start fails after it started etcd and kube-apiserver when a CRD
		// is refused; they must not outlive the test.
		_ = env.Stop()
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	dir, err := os.MkdirTemp("", "integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if clientset, err = versioned.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
