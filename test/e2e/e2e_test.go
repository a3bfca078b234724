//go:build e2e

// Package e2e tests the operator as a user meets it: the binary running
// against a local cluster whose Deployment controller, scheduler, garbage
// collector and KWOK nodes are real. hack/e2e.sh starts all of it; the tests
// use kubectl for what a user would type (test/framework).
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

var (
	k8s client.Client
	// kubectl is the cluster's admin, as a user types it.
	kubectl framework.Kubectl
	// clientset is the cluster's admin, for what runs pods' parts on this host.
	clientset kubernetes.Interface
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBECONFIG") == "" || os.Getenv("E2E_ROOT") == "" {
		fmt.Fprintln(os.Stderr, "the e2e tests run through hack/e2e.sh (make e2e), which sets KUBECONFIG and E2E_ROOT")
		os.Exit(1)
	}
	kubectl = framework.NewKubectl(os.Getenv("E2E_ROOT"), "")
	cfg, err := config.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// As kubectl above: a write a webhook had no time for is sent again.
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = framework.WebhookPatient(c)
	if clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The pods of every namespace answer on port 8080 of their addresses,
	// for the tests with real Envoys (realenvoy_test.go).
	ctx, stop := context.WithCancel(context.Background())
	podNet, err := podnet.Current()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if podnet.Available(podNet.Namespace()) {
		if err := podnet.Serve(ctx, podNet.Namespace(), &podnet.Pods{Client: clientset}, 8080); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// sample returns the path of a file in config/samples.
func sample(name string) string {
	return filepath.Join(os.Getenv("E2E_ROOT"), "config", "samples", name)
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, name string) string {
	t.Helper()
	kubectl.Run(t, "create", "namespace", name)
	t.Cleanup(func() { _, _ = kubectl.Out("delete", "namespace", name, "--wait=false") })
	return name
}
