package envoyconfig

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history/store"
)

// failingLists is the manager's client, whose Lists of EnvoyConfigs fail
// with a server timeout while fail is set.
func failingLists(fail *atomic.Bool) client.Client {
	return testenv.FailingLists(suite.Manager.GetClient(), fail, &examplev1.EnvoyConfigList{})
}

// A Secret's or an EndpointSlice's event whose EnvoyConfigs cannot be
// listed loses no fleet: it queues a resync of its namespace, whose
// reconcile fails, to be retried with backoff, while the List fails, and
// then queues every fleet of the namespace. The election queues a resync
// of every namespace.
func TestFailedListResyncsTheFleets(t *testing.T) {
	ctx := context.Background()
	ns, _ := newFleet(t)
	cfg := newConfig(ns, "a", cluster("a", "1s"))
	create(t, cfg)
	waitStatus(t, cfg, "the config to be published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue
	})
	edge := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "edge"}}

	var fail atomic.Bool
	fail.Store(true)
	c := failingLists(&fail)
	r := &Reconciler{Client: c, Namespace: operatorNamespace, IsLeader: func() bool { return true }, reports: map[string]parsedReport{},
		Histories: store.Store{Client: c, APIReader: suite.Manager.GetAPIReader(), Namespace: operatorNamespace}}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.queue.Store(&q)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-1", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}}}
	for what, got := range map[string][]reconcile.Request{"Secret": r.fleetsOfSecret(ctx, secret), "EndpointSlice": r.fleetsOfSlice(ctx, slice)} {
		if len(got) != 1 || got[0] != resyncRequest(ns) {
			t.Errorf("a failed List for the %s maps it to %v, want a resync of %s", what, got, ns)
		}
	}

	if _, err := r.Reconcile(ctx, resyncRequest(ns)); err == nil {
		t.Error("a resync whose List fails returned no error: the queue would not retry it")
	}
	if got := testenv.Drain(q); len(got) != 0 {
		t.Errorf("a failed resync queued %v", got)
	}
	fail.Store(false)
	if _, err := r.Reconcile(ctx, resyncRequest(ns)); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Drain(q); len(got) != 1 || !got[edge] {
		t.Errorf("the resync of %s queued %v, want its fleet %v", ns, got, edge)
	}

	// The election queues a resync of every namespace.
	elected := make(chan struct{})
	close(elected)
	r.enqueueOnElection(ctx, elected, q)
	if got := testenv.Drain(q); len(got) != 1 || !got[resyncRequest("")] {
		t.Fatalf("the election queued %v, want a resync of every namespace", got)
	}
	if _, err := r.Reconcile(ctx, resyncRequest("")); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Drain(q); !got[edge] {
		t.Errorf("the resync of every namespace queued %v, not %v", got, edge)
	}
}
