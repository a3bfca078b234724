package validate

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// servedHere is the generated validating configuration without the
// webhooks of other packages (the Watcher, PodSet and Envoy validators),
// which the suite does not serve: the API server would refuse their
// objects for want of an answer.
func servedHere(validating []*admissionv1.ValidatingWebhookConfiguration) []*admissionv1.ValidatingWebhookConfiguration {
	for _, c := range validating {
		c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionv1.ValidatingWebhook) bool {
			s := w.ClientConfig.Service
			return s == nil || s.Path == nil || *s.Path != Path
		})
	}
	return validating
}

// kubectl apply of an EnvoyConfig that defines an EDS cluster's load
// assignment twice, in spec.resources.endpoints and through
// spec.serviceEndpoints, is refused, naming both places; so is an update
// that makes a valid one do so. Through serviceEndpoints alone, it is
// admitted.
func TestLoadAssignmentDefinedTwiceRefused(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	const backendEndpoints = `{"cluster_name": "backend", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.0.0.1", "port_value": 80}}}}]}]}`
	const want = `spec.serviceEndpoints[0] ("backend"): the cluster load assignment of cluster "backend" is already defined at spec.resources.endpoints[0]`
	fromService := []examplev1.ServiceEndpoints{{Cluster: "backend", Service: "web", Port: intstr.FromInt32(80)}}

	twice := envoyConfig(ns, "twice", examplev1.EnvoyResources{Clusters: rawList(edsCluster), Endpoints: rawList(backendEndpoints)})
	twice.Spec.ServiceEndpoints = fromService
	err := suite.Client.Create(ctx, twice)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("create: got %v, want a denial saying %q", err, want)
	}

	once := envoyConfig(ns, "once", examplev1.EnvoyResources{Clusters: rawList(edsCluster)})
	once.Spec.ServiceEndpoints = fromService
	if err := suite.Client.Create(ctx, once); err != nil {
		t.Fatalf("create through serviceEndpoints alone: %v", err)
	}
	once.Spec.Resources.Endpoints = rawList(backendEndpoints)
	err = suite.Client.Update(ctx, once)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("update: got %v, want a denial saying %q", err, want)
	}
}
