package podset

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// countPodWrites counts the pod creates and deletes sent through the client.
func countPodWrites(creates, deletes *atomic.Int32) interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isPod := obj.(*corev1.Pod); isPod {
				creates.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, isPod := obj.(*corev1.Pod); isPod {
				deletes.Add(1)
			}
			return c.Delete(ctx, obj, opts...)
		},
	}
}

// A PodSet scaled from 0 to 1200 creates at most BurstReplicas (500) pods
// in one reconcile: 500, 500, then 200, each reconcile once the informer
// has delivered the previous one's pods. Scaled back to 0, it deletes at
// most 500 in one reconcile too.
func TestAtMostBurstReplicasPerReconcile(t *testing.T) {
	ctx := context.Background()
	ps := samplePodSet()
	ps.Spec.Replicas = 1200
	var creates, deletes atomic.Int32
	c := fakeClient(ps, countPodWrites(&creates, &deletes))
	r := newReconciler(c, events.NewFakeRecorder(10))
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ps)}
	for i, want := range []int32{500, 500, 200, 0} {
		creates.Store(0)
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		if got := creates.Load(); got != want {
			t.Fatalf("reconcile %d sent %d creates, want %d", i+1, got, want)
		}
		observeAll(t, r, c)
	}
	if n := podCount(t, c, ps.Namespace); n != 1200 || deletes.Load() != 0 {
		t.Fatalf("%d pods and %d deletes after the scale-up, want 1200 and none", n, deletes.Load())
	}

	if err := c.Get(ctx, req.NamespacedName, ps); err != nil {
		t.Fatal(err)
	}
	ps.Spec.Replicas = 0
	if err := c.Update(ctx, ps); err != nil {
		t.Fatal(err)
	}
	creates.Store(0)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := deletes.Load(); got != 500 {
		t.Errorf("the scale-down's first reconcile sent %d deletes, want 500", got)
	}
	if n := podCount(t, c, ps.Namespace); n != 700 || creates.Load() != 0 {
		t.Errorf("%d pods and %d creates after it, want 700 and none", n, creates.Load())
	}
}
