package envoyconfig

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history/store"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// leaderOver is a leader of the suite's fleets that reads and writes
// through c.
func leaderOver(c client.Client) *Reconciler {
	return &Reconciler{Client: c, Recorder: suite.Manager.GetEventRecorder(ControllerName), Server: xdsServer,
		Status:    status.Writer{Client: c, Recorder: suite.Manager.GetEventRecorder(ControllerName)},
		Histories: store.Store{Client: c, APIReader: suite.Manager.GetAPIReader(), Namespace: operatorNamespace},
		IsLeader:  func() bool { return true }, Namespace: operatorNamespace, Policy: suite.Reconciler.(*Reconciler).Policy,
		reports: map[string]parsedReport{}}
}

// The leader reads the replicas' reports once a reconcile: the status
// tells what the decision was made on. Here every read after the first
// finds another replica's report too, with five proxies that accepted the
// served version; a reconcile that read the reports again for the status
// would tell of them.
func TestReportsAreReadOnce(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "a", cluster("a", "1s"))
	create(t, cfg)
	cfg = waitStatus(t, cfg, "the config to be published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue
	})
	pauseLeader(t) // the suite's replica writes no status meanwhile

	later, err := report.Shards(operatorNamespace, "replica-later", report.Report{
		fleetID: {Version: cfg.Status.PublishedVersion, Connected: 5, Acked: 5},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	c := testenv.Faulty(suite.Manager.GetClient(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			o := (&client.ListOptions{}).ApplyOptions(opts)
			cms, ok := list.(*corev1.ConfigMapList)
			if !ok || o.LabelSelector == nil || !o.LabelSelector.Matches(labels.Set{names.ComponentLabel: report.Component}) {
				return nil
			}
			if reads++; reads > 1 {
				cms.Items = append(cms.Items, *later[0])
			}
			return nil
		},
	})
	r := leaderOver(c)
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "edge"}}); err != nil {
		t.Fatal(err)
	}
	if reads != 1 {
		t.Errorf("one reconcile read the replicas' reports %d times", reads)
	}
	got := &examplev1.EnvoyConfig{}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(cfg), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Proxies != cfg.Status.Proxies {
		t.Errorf("status.proxies = %+v, want %+v, what the decision was made on", got.Status.Proxies, cfg.Status.Proxies)
	}
}

// A failed read of the replicas' reports fails the reconcile, to be tried
// again: a decision and a status made on no reports would count no proxy.
func TestFailedReportListIsAnError(t *testing.T) {
	ctx := context.Background()
	ns, _ := newFleet(t)
	cfg := newConfig(ns, "a", cluster("a", "1s"))
	create(t, cfg)
	cfg = waitStatus(t, cfg, "the config to be published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue
	})
	pauseLeader(t) // the suite's replica writes no status meanwhile

	failed := errors.New("the reports cannot be listed")
	c := testenv.Faulty(suite.Manager.GetClient(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if _, ok := list.(*corev1.ConfigMapList); ok && o.LabelSelector != nil && o.LabelSelector.Matches(labels.Set{names.ComponentLabel: report.Component}) {
				return failed
			}
			return c.List(ctx, list, opts...)
		},
	})
	r := leaderOver(c)
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "edge"}}); !errors.Is(err, failed) {
		t.Fatalf("the reconcile returned %v, want the failed list", err)
	}
	got := &examplev1.EnvoyConfig{}
	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(cfg), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != cfg.ResourceVersion {
		t.Errorf("the EnvoyConfig was written (status %+v), though the reports could not be read", got.Status)
	}
}
