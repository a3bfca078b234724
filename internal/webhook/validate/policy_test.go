package validate

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// Every route of theft that the content policy closes is refused at kubectl
// apply, by the API server calling the validating webhook, with the
// EnvoyConfig, each refused resource and field named. Content a pod of the
// author's own could use is admitted.
func TestEnvoyConfigContentPolicy(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	for _, x := range xdstest.Exfiltrations(operatorNamespace) {
		t.Run(x.Name, func(t *testing.T) {
			err := suite.Client.Create(ctx, envoyConfig(ns, x.Name, x.Resources))
			if !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want a denial", err)
			}
			if !strings.Contains(err.Error(), "EnvoyConfig "+x.Name+" is invalid: ") {
				t.Errorf("denial %q does not name the EnvoyConfig", err)
			}
			for _, field := range x.Refused {
				if !strings.Contains(err.Error(), field+" ") {
					t.Errorf("denial %q does not name %s", err, field)
				}
			}
		})
	}
	fine := envoyConfig(ns, "fine", examplev1.EnvoyResources{Clusters: rawList(
		`{"name": "web", "type": "STRICT_DNS", "connect_timeout": "1s", "load_assignment": {"cluster_name": "web", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "web.`+ns+`.svc.cluster.local", "port_value": 80}}}}]}]}}`,
		`{"name": "app", "type": "STATIC", "connect_timeout": "1s", "load_assignment": {"cluster_name": "app", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}}}}]}]}}`,
	)})
	if err := suite.Client.Create(ctx, fine); err != nil {
		t.Errorf("a Service of the namespace and the application on localhost: %v", err)
	}
}
