package manager_test

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// suite runs the production manager with no controller: the tests look at
// the manager itself (its cache, its options) and start replicas beside it.
var suite testenv.Suite

func TestMain(m *testing.M) {
	suite.Main(m, func(ctrl.Manager) error { return nil })
}

// Production recovers a panicking reconcile and logs it; tests must not, so
// that a panic fails them.
func TestRecoverPanic(t *testing.T) {
	for _, panics := range []bool{false, true} {
		mgr, err := manager.New(suite.Manager.GetConfig(), manager.Options{MetricsAddr: "0", PanicOnReconcilePanic: panics})
		if err != nil {
			t.Fatal(err)
		}
		if got := mgr.GetControllerOptions().RecoverPanic; got == nil || *got == panics {
			t.Errorf("PanicOnReconcilePanic=%v: RecoverPanic = %v", panics, got)
		}
	}
}
