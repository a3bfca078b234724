package gateway

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/resync"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// failingLists is the manager's client, whose Lists of Gateways and of
// GatewayClasses fail with a server timeout while fail is set.
func failingLists(fail *atomic.Bool) client.Client {
	return testenv.FailingLists(suite.Manager.GetClient(), fail, &gwv1.GatewayList{}, &gwv1.GatewayClassList{})
}

// A class's or an Envoy's event whose Gateways or classes cannot be listed
// loses none: it queues a resync of every Gateway, or of every class,
// whose reconcile fails, to be retried with backoff, while the List fails,
// and then queues each of them.
func TestFailedListResyncs(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	tmpl := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "template"}, Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](1)}}
	if err := suite.Client.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	c := newClass(t, gateway.ControllerName, &gwv1.ParametersReference{
		Group: gwv1.Group(examplev1.GroupVersion.Group), Kind: "Envoy", Name: tmpl.Name, Namespace: ptr.To(gwv1.Namespace(ns)),
	})
	gw := newGateway(t, ns, c.Name, 80)
	// The fleet is made once the manager's cache holds the class and the
	// Gateway.
	testenv.WaitFor(t, suite.Client, ns, gateway.FleetName(gw.Name), &examplev1.Envoy{}, nil)
	gwReq := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: gw.Name}}
	classReq := reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}}

	var fail atomic.Bool
	fail.Store(true)
	kit := objects.NewKit(suite.Manager, ControllerName)
	kit.Client = failingLists(&fail)
	r := &Reconciler{Kit: kit}
	gateways := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer gateways.ShutDown()
	classes := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer classes.ShutDown()
	r.gateways.Set(gateways)
	r.classes.Set(classes)

	mapped := func() map[string][]reconcile.Request {
		return map[string][]reconcile.Request{
			"gatewaysOfClass":    r.gatewaysOfClass(ctx, c),
			"gatewaysOfTemplate": r.gatewaysOfTemplate(ctx, tmpl),
			"classesOfTemplate":  r.classesOfTemplate(ctx, tmpl),
		}
	}
	for what, got := range mapped() {
		if !slices.Equal(got, []reconcile.Request{resync.Request("")}) {
			t.Errorf("%s with a failed List maps to %v, want a resync of all", what, got)
		}
	}
	if _, err := r.Reconcile(ctx, resync.Request("")); err == nil {
		t.Error("a resync of the Gateways whose List fails returned no error: the queue would not retry it")
	}
	if _, err := r.ReconcileClass(ctx, resync.Request("")); err == nil {
		t.Error("a resync of the classes whose List fails returned no error: the queue would not retry it")
	}
	if got := testenv.Drain(gateways); len(got) != 0 {
		t.Errorf("a failed resync queued the Gateways %v", got)
	}
	if got := testenv.Drain(classes); len(got) != 0 {
		t.Errorf("a failed resync queued the classes %v", got)
	}

	// The List works again: the retried resyncs queue every Gateway, or
	// every Gateway of the namespace, and every class.
	fail.Store(false)
	if _, err := r.Reconcile(ctx, resync.Request("")); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Drain(gateways); !got[gwReq] {
		t.Errorf("the resync of every Gateway queued %v, not %v", slices.Collect(maps.Keys(got)), gwReq)
	}
	if _, err := r.Reconcile(ctx, resync.Request(ns)); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Drain(gateways); len(got) != 1 || !got[gwReq] {
		t.Errorf("the resync of %s queued %v, want %v", ns, slices.Collect(maps.Keys(got)), gwReq)
	}
	if _, err := r.ReconcileClass(ctx, resync.Request("")); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Drain(classes); !got[classReq] {
		t.Errorf("the resync of the classes queued %v, not %v", slices.Collect(maps.Keys(got)), classReq)
	}
	// And the maps find them again.
	want := map[string][]reconcile.Request{
		"gatewaysOfClass":    {gwReq},
		"gatewaysOfTemplate": {gwReq},
		"classesOfTemplate":  {classReq},
	}
	for what, got := range mapped() {
		if !slices.Equal(got, want[what]) {
			t.Errorf("%s maps to %v, want %v", what, got, want[what])
		}
	}
}
