package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// SettledWindow is how long ExpectNoWrites keeps counting after the last
// reconcile: events are sent asynchronously, and a write caused by a delayed
// event would come within it.
const SettledWindow = 3 * time.Second

// ExpectNoWrites proves that a settled object costs the API server nothing:
// it touches obj (see Touch), waits until the running controller has
// reconciled it, calls the suite's Reconciler for
// req three more times, and fails the test if any write request (events
// included) reaches obj's namespace from the manager, then or during
// SettledWindow. req is what the controller reconciles for obj (obj itself,
// unless the controller's requests name something else, as EnvoyConfig's
// name fleets).
func (s *Suite) ExpectNoWrites(t *testing.T, controller string, obj client.Object, req reconcile.Request) {
	t.Helper()
	ctx := context.Background()
	s.Quiet(t)
	s.Counter.Reset()
	s.Touch(t, controller, obj)
	for range 3 {
		if _, err := s.Reconciler.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	Consistently(t, SettledWindow, func() error {
		if w := s.Counter.WritesTo("/namespaces/" + obj.GetNamespace() + "/"); len(w) != 0 {
			return fmt.Errorf("a settled reconcile sent %d write requests: %v", len(w), w)
		}
		return nil
	})
}

// touchedAnnotation is the annotation Touch changes.
const touchedAnnotation = "test.kube-envoy-controller.io/touched"

// Touch changes an annotation of obj, which the controllers do not read,
// and waits until the named controller has reconciled obj since: the
// manager's cache holds the change (its informer has handled the event), the
// controller has finished a reconcile since, and its queue is drained. A test
// that checks that something did not happen checks it after Touch, instead
// of after a fixed sleep.
func (s *Suite) Touch(t *testing.T, controller string, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	before := ReconcileTotal(controller)
	stamp := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, touchedAnnotation, stamp)
	if err := s.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	cached := obj.DeepCopyObject().(client.Object)
	Eventually(t, "the controller to reconcile the touched object", func() (bool, error) {
		if err := s.Manager.GetClient().Get(ctx, client.ObjectKeyFromObject(obj), cached); err != nil {
			return false, err
		}
		// The cache holds the touch, or a later version of obj: a status
		// write still in flight when obj was touched may land after it, so
		// the touch's resourceVersion is not necessarily the newest.
		return cached.GetAnnotations()[touchedAnnotation] == stamp && ReconcileTotal(controller) > before && Idle(controller), nil
	})
}

// Idle reports whether the named controller has nothing queued and no
// reconcile running.
func Idle(controller string) bool {
	return gauge("workqueue_depth", "name", controller) == 0 &&
		gauge("controller_runtime_active_workers", "controller", controller) == 0
}

func gauge(name, label, value string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
