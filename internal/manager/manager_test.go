package manager_test

import (
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
)

// Production recovers a panicking reconcile and logs it; tests must not, so
// that a panic fails them.
func TestRecoverPanic(t *testing.T) {
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	for _, panics := range []bool{false, true} {
		mgr, err := manager.New(cfg, manager.Options{MetricsAddr: "0", PanicOnReconcilePanic: panics})
		if err != nil {
			t.Fatal(err)
		}
		if got := mgr.GetControllerOptions().RecoverPanic; got == nil || *got == panics {
			t.Errorf("PanicOnReconcilePanic=%v: RecoverPanic = %v", panics, got)
		}
	}
}
