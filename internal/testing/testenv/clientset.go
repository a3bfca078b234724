package testenv

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// MainClientset is a TestMain for a package whose tests need only a real
// API server and a clientset for it: it starts envtest, sets *cs, runs the
// tests, stops envtest and exits.
func MainClientset(m interface{ Run() int }, cs *kubernetes.Interface) {
	env, err := New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := 1
	if *cs, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

// StartClientset starts envtest for one test, stopped when the test ends,
// and returns it with a clientset for it: for a test that needs an API
// server of its own where the package's other tests need none.
func StartClientset(t testing.TB) (*envtest.Environment, kubernetes.Interface) {
	t.Helper()
	env, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env, cs
}

// Require ends a test that needs what this machine lacks, err saying what
// (root for the pods' network namespaces, a binary; nil: nothing lacks): it
// fails the test under CI (CI=true), where nothing may lack, and skips it,
// saying why, elsewhere.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("required under CI: %v", err)
	}
	t.Skipf("SKIPPED: %v", err)
}
