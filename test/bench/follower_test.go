//go:build bench

package bench

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// TestFollowerCounts feeds a Follower watch events by hand: it counts the
// objects that meet its condition now, not those that ever did, and notes
// the moment of the target once.
func TestFollowerCounts(t *testing.T) {
	dep := func(name string, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}, Status: appsv1.DeploymentStatus{AvailableReplicas: available}}
	}
	f := newFollower("ns", 2, deploymentAvailable)
	reached := func() bool {
		select {
		case <-f.done:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		ev      watch.Event
		met     int
		reached bool
	}{
		{watch.Event{Type: watch.Added, Object: dep("a", 0)}, 0, false},
		{watch.Event{Type: watch.Modified, Object: dep("a", 1)}, 1, false},
		{watch.Event{Type: watch.Modified, Object: dep("a", 1)}, 1, false}, // the same object again
		{watch.Event{Type: watch.Added, Object: &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}, 1, false},
		{watch.Event{Type: watch.Deleted, Object: dep("a", 1)}, 0, false},
		{watch.Event{Type: watch.Added, Object: dep("b", 1)}, 1, false},
		{watch.Event{Type: watch.Added, Object: dep("c", 1)}, 2, true},
		{watch.Event{Type: watch.Modified, Object: dep("c", 0)}, 1, true},
	}
	var at = f.reached
	for i, s := range steps {
		f.observe(s.ev)
		if len(f.met) != s.met || reached() != s.reached {
			t.Fatalf("step %d: %d met, reached %v; want %d, %v", i, len(f.met), reached(), s.met, s.reached)
		}
		if s.reached && at.IsZero() {
			at = f.reached
		}
		if !at.IsZero() && !f.reached.Equal(at) {
			t.Fatalf("step %d: the moment of the target moved from %v to %v", i, at, f.reached)
		}
	}

	broken := newFollower("ns", 1, deploymentAvailable)
	broken.observe(watch.Event{Type: watch.Error, Object: &metav1.Status{Message: "too old"}})
	if broken.err == nil {
		t.Fatal("an error event before the target left no error")
	}
	select {
	case <-broken.done:
	default:
		t.Fatal("an error event before the target did not end the wait")
	}
}
