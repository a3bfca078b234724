package podset

import (
	"sync"
	"time"
)

// ExpectationsTimeout is how long a PodSet waits for the pod events of its own
// creates and deletes before it looks at its pods again regardless. Events
// can be lost (a pod created and deleted between two lists of the informer),
// and a PodSet must not wait for them forever.
const ExpectationsTimeout = 5 * time.Minute

// expectations records, per PodSet, the pod creations and deletions that the
// controller has sent and whose events the informer has not delivered yet. It
// is a small equivalent of the ReplicaSet controller's
// UIDTrackingControllerExpectations.
//
// While a PodSet has outstanding expectations its pods in the cache are not the
// whole truth: counting them would create pods that already exist, or delete
// pods twice. The controller then leaves the pods alone and only reports status.
type expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

type expectation struct {
	adds      int                 // creations not observed yet; may go below zero
	deletes   map[string]struct{} // keys (namespace/name) of pods whose deletion is not observed yet
	timestamp time.Time           // when the expectations were set
}

func newExpectations() *expectations {
	return &expectations{m: map[string]*expectation{}, now: time.Now}
}

// Satisfied reports whether the controller may count key's pods in the cache:
// every creation and deletion it expected was observed, the expectations
// expired, or there never were any (a PodSet seen for the first time).
func (e *expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.m[key]
	if !ok {
		return true
	}
	if exp.adds <= 0 && len(exp.deletes) == 0 {
		return true
	}
	return e.now().Sub(exp.timestamp) > ExpectationsTimeout
}

// ExpectCreations records that n pods are about to be created for key. It
// replaces what key expected before; call it only when Satisfied(key).
func (e *expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{adds: n, timestamp: e.now()}
}

// ExpectDeletions records that the pods with the given keys are about to be
// deleted for key. It replaces what key expected before; call it only when
// Satisfied(key).
func (e *expectations) ExpectDeletions(key string, pods []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dels := make(map[string]struct{}, len(pods))
	for _, p := range pods {
		dels[p] = struct{}{}
	}
	e.m[key] = &expectation{deletes: dels, timestamp: e.now()}
}

// CreationObserved records that one creation for key was observed, or will
// never be (its create failed or was skipped).
func (e *expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.m[key]; ok {
		exp.adds--
	}
}

// DeletionObserved records that the deletion of pod for key was observed, or
// will never be (its delete failed). A pod whose deletion was not expected, or
// was already observed (a graceful deletion is seen twice: when its
// deletionTimestamp is set and when it is gone), changes nothing.
func (e *expectations) DeletionObserved(key, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.m[key]; ok {
		delete(exp.deletes, pod)
	}
}

// Forget drops the expectations of key: the PodSet is gone.
func (e *expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
