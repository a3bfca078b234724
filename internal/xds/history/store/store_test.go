package store

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

const operatorNS = "kube-envoy-controller"

var edge = fleet.ID{Namespace: "shop", Name: "edge"}

// served returns a history that serves one revision of fleet edge.
func served(name string) publish.History {
	c := []translate.Config{{Name: edge.Namespace + "/" + name, Spec: examplev1.EnvoyConfigSpec{EnvoyRef: edge.Name, Resources: examplev1.EnvoyResources{
		Clusters: []runtime.RawExtension{{Raw: []byte(`{"name": "` + name + `", "connect_timeout": "1s"}`)}},
	}}}}
	v := translate.VersionOf(c)
	return publish.History{Fleet: edge.String(), Current: v, Revisions: []publish.Revision{{Version: v, Configs: c}}}
}

// legacyOf returns h as the previous release kept it, in the fleet's
// namespace.
func legacyOf(t *testing.T, h publish.History) *corev1.ConfigMap {
	t.Helper()
	cm, err := history.ConfigMap(operatorNS, edge, h)
	if err != nil {
		t.Fatal(err)
	}
	cm.Namespace, cm.Name = edge.Namespace, history.LegacyName(edge.Name)
	cm.Labels = map[string]string{names.ManagedByLabel: names.ManagedByValue, names.ComponentLabel: history.LegacyComponent}
	cm.Annotations = map[string]string{history.FleetAnnotation: edge.Name}
	return cm
}

// counted returns a Store over a fake API server holding objs, and the
// count of the reads of legacy histories it made.
func counted(t *testing.T, objs ...client.Object) (*Store, *atomic.Int32) {
	t.Helper()
	var legacyGets atomic.Int32
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Namespace == edge.Namespace && key.Name == history.LegacyName(edge.Name) {
				legacyGets.Add(1)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	return &Store{Client: c, APIReader: c, Namespace: operatorNS}, &legacyGets
}

// The migration from the previous release runs once per fleet: a legacy
// history is adopted while the fleet has none in the operator's namespace,
// and retired once it has; from then on a read of the fleet's history
// asks the API server for nothing more.
func TestLegacyMigrationRunsOnce(t *testing.T) {
	ctx := context.Background()
	h := served("a")
	s, legacyGets := counted(t, legacyOf(t, h))

	// Adopted, as far as the EnvoyConfigs' status vouches for it, on every
	// read until the history is in the operator's namespace.
	for range 2 {
		st, err := s.Load(ctx, edge, h.Current)
		if err != nil || st.Readable || st.Legacy == nil || st.History.Current != h.Current || st.History.Served() == nil {
			t.Fatalf("Load = %+v, %v; want the legacy history adopted", st, err)
		}
	}
	if got := legacyGets.Load(); got != 2 {
		t.Errorf("%d reads of the legacy history before the migration, want 2", got)
	}

	// The leader records the history and retires the legacy one.
	st, _ := s.Load(ctx, edge, h.Current)
	if err := s.Record(ctx, edge, st, st.History); err != nil {
		t.Fatal(err)
	}
	if st, _ = s.Load(ctx, edge, h.Current); !st.Readable || st.Legacy == nil {
		t.Fatalf("after Record: Load = %+v; want the history readable beside the legacy one", st)
	}
	if err := s.RetireLegacy(ctx, st); err != nil {
		t.Fatal(err)
	}
	legacyGets.Store(0)

	// The first read after finds the legacy history gone; no read after
	// looks again.
	for i := range 3 {
		st, err := s.Load(ctx, edge, h.Current)
		if err != nil || !st.Readable || st.Legacy != nil || st.History.Current != h.Current {
			t.Fatalf("read %d after the migration: Load = %+v, %v", i, st, err)
		}
	}
	if got := legacyGets.Load(); got != 1 {
		t.Errorf("%d reads of the legacy history after the migration, want 1", got)
	}
}

// A fleet that never had a legacy history is looked up once; one whose
// history is not readable in the operator's namespace is looked up on each
// read, since a legacy history is then what may be adopted.
func TestLegacyLookedUpUntilMigrated(t *testing.T) {
	ctx := context.Background()
	h := served("a")
	cm, err := history.ConfigMap(operatorNS, edge, h)
	if err != nil {
		t.Fatal(err)
	}
	s, legacyGets := counted(t, cm)
	for range 3 {
		if st, err := s.Load(ctx, edge, h.Current); err != nil || !st.Readable {
			t.Fatalf("Load = %+v, %v", st, err)
		}
	}
	if got := legacyGets.Load(); got != 1 {
		t.Errorf("%d reads of the legacy history, want 1", got)
	}

	none, legacyGets := counted(t)
	for range 2 {
		if st, err := none.Load(ctx, edge, ""); err != nil || st.Readable || st.Object != nil {
			t.Fatalf("Load = %+v, %v", st, err)
		}
	}
	if got := legacyGets.Load(); got != 2 {
		t.Errorf("%d reads of the legacy history of a fleet with none, want 2", got)
	}

	// A fleet forgotten is looked up afresh if it comes back.
	st, _ := s.Load(ctx, edge, "")
	if err := s.Forget(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.migrated.Load(edge); ok {
		t.Error("a forgotten fleet is still remembered as migrated")
	}
}
