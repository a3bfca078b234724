package webhook

import (
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var suite testenv.Suite

// TestMain serves the injector and the validator as Setup registers them, to
// an API server that calls them through the generated configurations.
func TestMain(m *testing.M) {
	hooks, validating, err := testenv.WebhookManifests()
	if err == nil && (len(hooks) != 1 || len(validating) != 1) {
		err = fmt.Errorf("config/webhook/manifests.yaml: want one mutating and one validating configuration, found %d and %d", len(hooks), len(validating))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	suite.Webhooks, suite.ValidatingWebhooks = hooks, validating
	suite.Main(m, func(mgr ctrl.Manager) error {
		return Setup(mgr, Options{Namespace: DefaultNamespace})
	})
}
