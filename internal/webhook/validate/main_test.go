package validate

import (
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

var suite testenv.Suite

// operatorNamespace is the operator's own namespace, which the generated
// configuration leaves out, as the content policy knows it.
const operatorNamespace = "kube-envoy-controller"

// TestMain serves the validator, as the operator does, to an API server
// that calls it through the generated ValidatingWebhookConfiguration.
func TestMain(m *testing.M) {
	_, validating, err := testenv.WebhookManifests()
	if err == nil && len(validating) != 1 {
		err = fmt.Errorf("config/webhook/manifests.yaml: want one validating configuration, found %d", len(validating))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	suite.ValidatingWebhooks = validating
	suite.Main(m, func(mgr ctrl.Manager) error {
		mgr.GetWebhookServer().Register(Path, NewWebhook(mgr, translate.Policy{Namespace: operatorNamespace}))
		return nil
	})
}

// waitForServer waits until the suite's webhook server accepts connections.
func waitForServer(t *testing.T) {
	t.Helper()
	testenv.WaitServing(t, suite.Manager)
}
