package validate

import (
	"context"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

var suite testenv.Suite

// judge is the real Envoy the suite's validator loads EnvoyConfigs in:
// bin/envoy, or $ENVOY. Without one it is Unavailable, and the tests that
// need it say so (realenvoy.Require).
var judge *envoyjudge.Judge

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
	suite.ValidatingWebhooks = servedHere(validating)
	envoy, _ := realenvoy.Binary()
	judge = envoyjudge.New(context.Background(), envoyjudge.Options{Envoy: envoy, Concurrency: 2, Timeout: realenvoy.JudgeTimeout})
	suite.Main(m, func(mgr ctrl.Manager) error {
		mgr.GetWebhookServer().Register(Path, NewWebhook(mgr, translate.Policy{Namespace: operatorNamespace}, judge))
		return nil
	})
}

// waitForServer waits until the suite's webhook server accepts connections.
func waitForServer(t *testing.T) {
	t.Helper()
	testenv.WaitServing(t, suite.Manager)
}
