package podset

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newExpectations()
	e.now = func() time.Time { return now }
	const key, uid = "ns/ps", types.UID("uid-1")

	if !e.Satisfied(key, uid) {
		t.Fatal("a PodSet never seen must be satisfied")
	}
	e.ExpectCreations(key, uid, 2)
	if e.Satisfied(key, uid) {
		t.Fatal("satisfied with two creations outstanding")
	}
	e.CreationObserved(key, uid)
	e.CreationObserved("ns/other", "uid-2") // another PodSet's pod changes nothing here
	if e.Satisfied(key, uid) {
		t.Fatal("satisfied with one creation outstanding")
	}
	e.CreationObserved(key, uid)
	if !e.Satisfied(key, uid) {
		t.Fatal("not satisfied after both creations were observed")
	}

	e.ExpectDeletions(key, uid, []string{"ns/a", "ns/b"})
	e.DeletionObserved(key, uid, "ns/a")
	e.DeletionObserved(key, uid, "ns/a") // the same pod seen again (deletionTimestamp, then gone)
	e.DeletionObserved(key, uid, "ns/c") // a pod nobody asked to delete
	if e.Satisfied(key, uid) {
		t.Fatal("satisfied while ns/b's deletion is outstanding")
	}
	e.DeletionObserved(key, uid, "ns/b")
	if !e.Satisfied(key, uid) {
		t.Fatal("not satisfied after both deletions were observed")
	}

	e.ExpectCreations(key, uid, 1)
	now = now.Add(ExpectationsTimeout - time.Second)
	if e.Satisfied(key, uid) {
		t.Fatal("expired early")
	}
	now = now.Add(2 * time.Second)
	if !e.Satisfied(key, uid) {
		t.Fatal("expectations never expire: a lost event would stall the PodSet forever")
	}

	e.ExpectCreations(key, uid, 1)
	e.Forget(key)
	if !e.Satisfied(key, uid) {
		t.Fatal("a forgotten PodSet is not satisfied")
	}
}

// A PodSet deleted and created again under the same name is another object:
// what the first one expected neither holds the second back nor is settled by
// the first one's pods.
func TestExpectationsBelongToOneObject(t *testing.T) {
	e := newExpectations()
	const key, first, second = "ns/ps", types.UID("uid-1"), types.UID("uid-2")

	e.ExpectCreations(key, first, 1) // its event never comes
	if e.Satisfied(key, first) {
		t.Fatal("the first PodSet is satisfied with a creation outstanding")
	}
	if !e.Satisfied(key, second) {
		t.Fatal("the second PodSet waits for the first one's creation")
	}
	if !e.Satisfied(key, first) {
		t.Fatal("the first PodSet's expectations were kept once the second was seen")
	}

	e.ExpectCreations(key, second, 1)
	e.CreationObserved(key, first) // a late pod of the first PodSet
	if e.Satisfied(key, second) {
		t.Fatal("the first PodSet's pod settled the second's creation")
	}
	e.CreationObserved(key, second)
	if !e.Satisfied(key, second) {
		t.Fatal("not satisfied after its creation was observed")
	}

	e.ExpectDeletions(key, second, []string{"ns/a"})
	e.DeletionObserved(key, first, "ns/a") // the same pod name, under the first PodSet
	if e.Satisfied(key, second) {
		t.Fatal("the first PodSet's pod settled the second's deletion")
	}
	e.DeletionObserved(key, second, "ns/a")
	if !e.Satisfied(key, second) {
		t.Fatal("not satisfied after its deletion was observed")
	}
}

func TestSlowStartBatch(t *testing.T) {
	var calls atomic.Int32
	ok := func() error { calls.Add(1); return nil }
	if n, err := slowStartBatch(10, 1, ok); n != 10 || err != nil || calls.Load() != 10 {
		t.Errorf("all succeed: %d successes, %v, %d calls", n, err, calls.Load())
	}
	calls.Store(0)
	if n, err := slowStartBatch(0, 1, ok); n != 0 || err != nil || calls.Load() != 0 {
		t.Errorf("zero: %d successes, %v, %d calls", n, err, calls.Load())
	}

	// Every call after the third fails, as with a quota of three pods: batches
	// of 1 and 2 succeed, the batch of 4 fails, and nothing more is sent.
	calls.Store(0)
	quota := errors.New("exceeded quota")
	n, err := slowStartBatch(100, 1, func() error {
		if calls.Add(1) > 3 {
			return quota
		}
		return nil
	})
	if n != 3 || !errors.Is(err, quota) || calls.Load() != 7 {
		t.Errorf("quota of 3: %d successes, %v, %d calls; want 3, the quota error, 7 calls (1+2+4)", n, err, calls.Load())
	}
}
