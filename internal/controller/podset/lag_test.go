package podset

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// These tests drive the reconciler with a fake client, to control exactly what
// its cache shows and which writes fail.

func fakeClient(ps *demov1alpha1.PodSet, funcs interceptor.Funcs) client.WithWatch {
	return fake.NewClientBuilder().
		WithScheme(manager.NewScheme()).
		WithObjects(ps).
		WithStatusSubresource(&demov1alpha1.PodSet{}).
		WithIndex(&corev1.Pod{}, objects.ControllerUIDIndex, func(o client.Object) []string {
			if ref := metav1.GetControllerOf(o); ref != nil {
				return []string{string(ref.UID)}
			}
			return nil
		}).
		WithInterceptorFuncs(funcs).
		Build()
}

func podCount(t *testing.T, c client.Client, ns string) int {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

// The informer has not delivered the pods a reconcile created when the next
// reconcile runs: its cache shows none. The expectations keep the PodSet from
// creating them again.
func TestNoPodBeyondReplicasWhenTheCacheLags(t *testing.T) {
	ctx := context.Background()
	ps := samplePodSet()
	ps.Generation = 1
	lagging := true
	base := fakeClient(ps, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, isPods := list.(*corev1.PodList); isPods && lagging {
				return nil // the cache has not seen any pod yet
			}
			return c.List(ctx, list, opts...)
		},
	})
	r := newReconciler(base, events.NewFakeRecorder(100))
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ps)}
	for range 5 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	lagging = false
	if n := podCount(t, base, ps.Namespace); n != 3 {
		t.Fatalf("%d pods after 5 reconciles on a lagging cache, want 3", n)
	}

	// The informer catches up: its events settle the expectations and queue the PodSet.
	var pods corev1.PodList
	if err := base.List(ctx, &pods); err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := r.podHandler()
	for i := range pods.Items {
		h.Create(ctx, event.CreateEvent{Object: &pods.Items[i]}, q)
	}
	if q.Len() != 1 {
		t.Errorf("queue length %d after the PodSet's pod events, want the PodSet once", q.Len())
	}
	if !r.exp.Satisfied(req.String(), ps.UID) {
		t.Fatal("expectations not satisfied after every creation was observed")
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := podCount(t, base, ps.Namespace); n != 3 {
		t.Errorf("%d pods once the cache caught up, want 3", n)
	}
	got := &demov1alpha1.PodSet{}
	if err := base.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Replicas != 3 {
		t.Errorf("status.replicas = %d, want 3", got.Status.Replicas)
	}
}

// A quota that admits three pods: the slow start sends batches of 1, 2 and 4
// creates and stops after the failing batch, instead of sending all ten.
func TestQuotaStopsTheScaleUpEarly(t *testing.T) {
	ctx := context.Background()
	ps := samplePodSet()
	ps.Spec.Replicas = 10
	var creates atomic.Int32
	var mu sync.Mutex // the quota check and the create happen together, as in the API server
	base := fakeClient(ps, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isPod := obj.(*corev1.Pod); !isPod {
				return c.Create(ctx, obj, opts...)
			}
			creates.Add(1)
			mu.Lock()
			defer mu.Unlock()
			var pods corev1.PodList
			if err := c.List(ctx, &pods); err != nil {
				return err
			}
			if len(pods.Items) >= 3 {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("exceeded quota: pods=3"))
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	rec := events.NewFakeRecorder(100)
	r := newReconciler(base, rec)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ps)}
	if _, err := r.Reconcile(ctx, req); err == nil {
		t.Fatal("a reconcile whose creates failed returned no error: it would not be retried")
	}
	if n := podCount(t, base, ps.Namespace); n != 3 {
		t.Errorf("%d pods, want the 3 the quota admits", n)
	}
	if creates.Load() != 7 {
		t.Errorf("%d create requests, want 7 (batches of 1, 2 and 4)", creates.Load())
	}
	got := &demov1alpha1.PodSet{}
	if err := base.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, demov1alpha1.PodSetConditionReplicaFailure)
	if c == nil || c.Status != "True" || c.Reason != demov1alpha1.PodSetReasonFailedCreate || !strings.Contains(c.Message, "exceeded quota") {
		t.Errorf("ReplicaFailure = %+v", c)
	}
	var evs []string
	for len(rec.Events) > 0 {
		evs = append(evs, <-rec.Events)
	}
	if joined := strings.Join(evs, "\n"); !strings.Contains(joined, "Normal SuccessfulCreate Created 3 pods") ||
		!strings.Contains(joined, "Warning FailedCreate") {
		t.Errorf("events = %q", evs)
	}

	// The retry, once the informer has delivered the 3 pods, starts again with
	// one create, which fails: one request, not seven.
	observeAll(t, r, base)
	creates.Store(0)
	if _, err := r.Reconcile(ctx, req); err == nil {
		t.Fatal("retry: no error")
	}
	if creates.Load() != 1 {
		t.Errorf("the retry sent %d create requests, want 1", creates.Load())
	}
}

// observeAll delivers a create event for every pod, as the informer does.
func observeAll(t *testing.T, r *Reconciler, c client.Client) {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for i := range pods.Items {
		r.podHandler().Create(context.Background(), event.CreateEvent{Object: &pods.Items[i]}, q)
	}
}
