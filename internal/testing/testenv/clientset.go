package testenv

import (
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
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
