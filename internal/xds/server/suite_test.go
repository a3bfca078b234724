package server

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// suite is the API server the reporter's tests write reports to; the other
// tests of the package need none.
var suite testenv.Suite

// operatorNamespace holds the replicas' reports of their proxies.
const operatorNamespace = "kec-system"

func TestMain(m *testing.M) {
	suite.Main(m, func(mgr ctrl.Manager) error {
		c, err := client.New(mgr.GetConfig(), client.Options{})
		if err != nil {
			return err
		}
		return c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})
	})
}
