package podset

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestExpectations(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newExpectations()
	e.now = func() time.Time { return now }
	const key = "ns/ps"

	if !e.Satisfied(key) {
		t.Fatal("a PodSet never seen must be satisfied")
	}
	e.ExpectCreations(key, 2)
	if e.Satisfied(key) {
		t.Fatal("satisfied with two creations outstanding")
	}
	e.CreationObserved(key)
	e.CreationObserved("ns/other") // another PodSet's pod changes nothing here
	if e.Satisfied(key) {
		t.Fatal("satisfied with one creation outstanding")
	}
	e.CreationObserved(key)
	if !e.Satisfied(key) {
		t.Fatal("not satisfied after both creations were observed")
	}

	e.ExpectDeletions(key, []string{"ns/a", "ns/b"})
	e.DeletionObserved(key, "ns/a")
	e.DeletionObserved(key, "ns/a") // the same pod seen again (deletionTimestamp, then gone)
	e.DeletionObserved(key, "ns/c") // a pod nobody asked to delete
	if e.Satisfied(key) {
		t.Fatal("satisfied while ns/b's deletion is outstanding")
	}
	e.DeletionObserved(key, "ns/b")
	if !e.Satisfied(key) {
		t.Fatal("not satisfied after both deletions were observed")
	}

	e.ExpectCreations(key, 1)
	now = now.Add(ExpectationsTimeout - time.Second)
	if e.Satisfied(key) {
		t.Fatal("expired early")
	}
	now = now.Add(2 * time.Second)
	if !e.Satisfied(key) {
		t.Fatal("expectations never expire: a lost event would stall the PodSet forever")
	}

	e.ExpectCreations(key, 1)
	e.Forget(key)
	if !e.Satisfied(key) {
		t.Fatal("a forgotten PodSet is not satisfied")
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
