// Package integration tests the APIs as a program or a kubectl user sees them,
// against a real API server (envtest) with the project's CRDs and the
// validating webhooks (EnvoyConfig, Watcher, PodSet), served as the operator
// serves them, but no controller: the generated typed clients
// (pkg/generated), the CRDs' kubectl conventions (short names, the kec
// category, printer columns), and what admission refuses.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/clientset/versioned"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

var (
	cfg       *rest.Config
	kubectl   framework.Kubectl // bin/kubectl against the test's API server
	kube      kubernetes.Interface
	clientset versioned.Interface
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
	_, validating, err := testenv.WebhookManifests()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.WebhookInstallOptions.ValidatingWebhooks = validating
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
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubectl = framework.NewKubectl(root, filepath.Join(dir, "kubeconfig"))
	if err := os.WriteFile(kubectl.Kubeconfig, env.KubeConfig, 0o600); err != nil {
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
	stop, err := serveWebhooks(&env.WebhookInstallOptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serving the webhooks:", err)
		return 1
	}
	defer stop()
	return m.Run()
}

// serveWebhooks runs the operator's webhook server, without controllers,
// until stop is called, and waits until it serves: until then the API server
// fails every request the validating webhook is called for.
func serveWebhooks(hooks *envtest.WebhookInstallOptions) (stop func(), err error) {
	mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0",
		WebhookHost: hooks.LocalServingHost, WebhookPort: hooks.LocalServingPort, WebhookCertDir: hooks.LocalServingCertDir})
	if err != nil {
		return nil, err
	}
	if err := webhook.Setup(mgr, webhook.Options{Namespace: webhook.DefaultNamespace}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}
	started := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testenv.Timeout, true, func(context.Context) (bool, error) {
		return started(nil) == nil, nil
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("the webhook server did not start: %w", err)
	}
	return stop, nil
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
