package podset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
//
// Expectations are kept under the PodSet's namespace/name, which is all a
// reconcile of a deleted PodSet knows to forget them by, but belong to one
// object: its UID. A PodSet deleted and created again under the same name is
// another object, with other pods; what its predecessor still expected (an
// event that never came, a reconcile still running when it was replaced)
// must not hold it back until the timeout, and the predecessor's pod events
// must not settle it.
type expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

type expectation struct {
	uid       types.UID           // the PodSet the expectations belong to
	adds      int                 // creations not observed yet; may go below zero
	deletes   map[string]struct{} // keys (namespace/name) of pods whose deletion is not observed yet
	timestamp time.Time           // when the expectations were set
}

func newExpectations() *expectations {
	return &expectations{m: map[string]*expectation{}, now: time.Now}
}

// get returns the expectations of the PodSet key with uid, or nil when it has
// none: never set, forgotten, or set for another object under the same name.
// The caller holds e.mu.
func (e *expectations) get(key string, uid types.UID) *expectation {
	if exp, ok := e.m[key]; ok && exp.uid == uid {
		return exp
	}
	return nil
}

// Satisfied reports whether the controller may count the pods in the cache of
// the PodSet key with uid: every creation and deletion it expected was
// observed, the expectations expired, or there never were any (a PodSet seen
// for the first time, or created again under a name whose previous object
// left expectations behind: those are dropped).
func (e *expectations) Satisfied(key string, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.get(key, uid)
	if exp == nil {
		delete(e.m, key) // a predecessor's, if any: nothing will settle them for this object
		return true
	}
	if exp.adds <= 0 && len(exp.deletes) == 0 {
		return true
	}
	return e.now().Sub(exp.timestamp) > ExpectationsTimeout
}

// ExpectCreations records that n pods are about to be created for the PodSet
// key with uid. It replaces what key expected before; call it only when
// Satisfied(key, uid).
func (e *expectations) ExpectCreations(key string, uid types.UID, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{uid: uid, adds: n, timestamp: e.now()}
}

// ExpectDeletions records that the pods with the given keys are about to be
// deleted for the PodSet key with uid. It replaces what key expected before;
// call it only when Satisfied(key, uid).
func (e *expectations) ExpectDeletions(key string, uid types.UID, pods []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dels := make(map[string]struct{}, len(pods))
	for _, p := range pods {
		dels[p] = struct{}{}
	}
	e.m[key] = &expectation{uid: uid, deletes: dels, timestamp: e.now()}
}

// CreationObserved records that one creation for the PodSet key with uid was
// observed, or will never be (its create failed or was skipped). A pod of
// another object under the same name changes nothing.
func (e *expectations) CreationObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp := e.get(key, uid); exp != nil {
		exp.adds--
	}
}

// DeletionObserved records that the deletion of pod for the PodSet key with
// uid was observed, or will never be (its delete failed). A pod whose deletion
// was not expected, or was already observed (a graceful deletion is seen
// twice: when its deletionTimestamp is set and when it is gone), changes
// nothing.
func (e *expectations) DeletionObserved(key string, uid types.UID, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp := e.get(key, uid); exp != nil {
		delete(exp.deletes, pod)
	}
}

// Forget drops the expectations of key, whichever object they belong to: the
// PodSet is gone.
func (e *expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
