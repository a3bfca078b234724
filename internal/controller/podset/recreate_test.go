package podset

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// controlledPods returns the pods in ns controlled by the object with uid
// that are not being deleted. Envtest runs no garbage collector, so the pods
// of a deleted PodSet stay, and only their owner's UID tells them apart.
func controlledPods(t *testing.T, ns string, uid types.UID) int {
	t.Helper()
	n := 0
	for _, p := range livePods(t, ns) {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == uid {
			n++
		}
	}
	return n
}

// A PodSet deleted and created again under the same name is a new object: the
// expectations its predecessor left behind must not hold it back. Here the
// predecessor expected a creation whose event never reached the informer (a
// pod created and deleted between two of its lists does that), recorded by a
// reconcile that was still running when the PodSet was replaced. Before the
// expectations knew objects apart, the new PodSet then created no pod until
// ExpectationsTimeout (5 minutes, beyond testenv.Timeout) had passed.
func TestRecreatedPodSetIsNotHeldByItsPredecessor(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	r := suite.Reconciler.(*Reconciler)

	old := newPodSet(ns, "again", 1)
	startPodSet(t, old)
	if err := suite.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, suite.Client, ns, old.Name, &demov1alpha1.PodSet{})

	// The new PodSet starts empty, so that its first reconcile, which may
	// come before or after the predecessor's lost creation is recorded,
	// creates nothing either way.
	cur := newPodSet(ns, old.Name, 0)
	if err := suite.Client.Create(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cur, "the new PodSet reconciled", func(demov1alpha1.PodSetStatus) bool { return true })
	if cur.UID == old.UID {
		t.Fatal("the PodSet was not recreated")
	}

	// The predecessor's reconcile records a creation that is never observed.
	key := client.ObjectKeyFromObject(old).String()
	r.exp.ExpectCreations(key, old.UID, 1)

	if err := suite.Client.Get(ctx, client.ObjectKeyFromObject(cur), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Replicas = 2
	if err := suite.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the new PodSet's 2 pods", func() (bool, error) {
		return controlledPods(t, ns, cur.UID) == 2, nil
	})
	if n := controlledPods(t, ns, old.UID); n != 1 {
		t.Errorf("%d pods of the old PodSet, want its 1 untouched", n)
	}
}
