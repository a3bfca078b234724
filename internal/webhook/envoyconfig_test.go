package webhook

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testenv"
)

func rawList(items ...string) []runtime.RawExtension {
	out := make([]runtime.RawExtension, len(items))
	for i, s := range items {
		out[i] = runtime.RawExtension{Raw: []byte(s)}
	}
	return out
}

const (
	edsCluster = `{"name": "backend", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}}}`
	toBackend  = `{"name": "local", "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "backend"}}]}]}`
)

func envoyConfig(ns, name string, res examplev1.EnvoyResources) *examplev1.EnvoyConfig {
	return &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: res}}
}

// kubectl apply of an invalid EnvoyConfig is refused by the validating
// webhook, with a message that names the resource and the field.
func TestEnvoyConfigAdmission(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	tests := []struct {
		name string
		res  examplev1.EnvoyResources
		want []string
	}{
		{"unknown-field", examplev1.EnvoyResources{Clusters: rawList(`{"name": "c", "conect_timeout": "1s"}`)},
			[]string{"spec.resources.clusters[0]", `unknown field "conect_timeout"`}},
		{"invalid-value", examplev1.EnvoyResources{Clusters: rawList(`{"name": "c", "connect_timeout": "-1s"}`)},
			[]string{`spec.resources.clusters[0] ("c")`, "ConnectTimeout"}},
		{"inside-typed-config", examplev1.EnvoyResources{Listeners: rawList(`{"name": "l", "filter_chains": [{"filters": [{"name": "hcm", "typed_config":
			{"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
			 "rds": {"route_config_name": "r", "config_source": {"ads": {}}}}}]}]}`)},
			[]string{`spec.resources.listeners[0] ("l")`, "StatPrefix"}},
		{"dangling-reference", examplev1.EnvoyResources{Routes: rawList(toBackend)},
			[]string{`spec.resources.routes[0] ("local")`, `cluster "backend" does not exist`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := suite.Client.Create(ctx, envoyConfig(ns, tt.name, tt.res))
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want a denial", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("denial %q does not mention %q", err, w)
				}
			}
		})
	}

	// References may be satisfied by another EnvoyConfig of the fleet.
	if err := suite.Client.Create(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{Clusters: rawList(edsCluster)})); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the cache to see the clusters", func() (bool, error) {
		err := suite.Client.Create(ctx, envoyConfig(ns, "routes", examplev1.EnvoyResources{Routes: rawList(toBackend)}))
		return err == nil, err
	})
	// A change that breaks a valid object is refused too.
	cfg := &examplev1.EnvoyConfig{}
	if err := suite.Client.Get(ctx, clientKey(ns, "clusters"), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Spec.Resources.Clusters = rawList(`{"name": "backend", "type": "EDS"}`, `{"name": "backend", "type": "EDS"}`)
	if err := suite.Client.Update(ctx, cfg); err == nil || !strings.Contains(err.Error(), `cluster "backend" is already defined`) {
		t.Errorf("update: got %v, want a denial for the duplicate cluster", err)
	}

	// The fleet is judged as it would be after the change: an update that
	// drops the cluster another EnvoyConfig's route needs is refused, and so
	// is deleting the EnvoyConfig that defines it. Both name what would break.
	const breaks = `it would break EnvoyConfig ` // + ns/routes
	if err := suite.Client.Get(ctx, clientKey(ns, "clusters"), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Spec.Resources.Clusters = rawList(strings.Replace(edsCluster, `"backend"`, `"other"`, 1))
	err := suite.Client.Update(ctx, cfg)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), breaks+ns+`/routes: spec.resources.routes[0] ("local"): cluster "backend" does not exist`) {
		t.Errorf("update: got %v, want a denial that names the broken route", err)
	}
	err = suite.Client.Delete(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{}))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot be deleted: "+breaks+ns+"/routes") {
		t.Errorf("delete: got %v, want a denial that names the broken route", err)
	}
	// Once nothing needs it, it may go.
	if err := suite.Client.Delete(ctx, envoyConfig(ns, "routes", examplev1.EnvoyResources{})); err != nil {
		t.Fatalf("deleting the routes: %v", err)
	}
	testenv.Eventually(t, "the clusters to be deletable", func() (bool, error) {
		err := suite.Client.Delete(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{}))
		return err == nil, err
	})
}

// In a namespace being deleted, every EnvoyConfig may go, in any order: the
// namespace controller must not be stuck on references.
func TestEnvoyConfigDeleteInTerminatingNamespace(t *testing.T) {
	ctx := context.Background()
	waitForServer(t)
	ns := suite.Namespace(t)
	if err := suite.Client.Create(ctx, envoyConfig(ns, "clusters", examplev1.EnvoyResources{Clusters: rawList(edsCluster)})); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the routes to be admitted", func() (bool, error) {
		err := suite.Client.Create(ctx, envoyConfig(ns, "routes", examplev1.EnvoyResources{Routes: rawList(toBackend)}))
		return err == nil, err
	})
	clusters := envoyConfig(ns, "clusters", examplev1.EnvoyResources{})
	if err := suite.Client.Delete(ctx, clusters); !apierrors.IsForbidden(err) {
		t.Fatalf("delete before the namespace goes: got %v, want a denial", err)
	}
	if err := suite.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// The test API server runs no namespace controller: the namespace stays
	// Terminating, and its EnvoyConfigs are deleted here as that controller would.
	if err := suite.Client.Delete(ctx, clusters); err != nil {
		t.Errorf("delete in a terminating namespace: %v", err)
	}
}

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
