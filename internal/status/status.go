// Package status is the one way every controller ends a reconcile: it writes
// the object's status when it changed, records the Warning event of an
// object that became Degraded, and turns what happened into
// controller-runtime's result, with one policy for every kind:
//
//   - The status is written through the status subresource, only when it
//     differs, so a settled reconcile sends nothing.
//   - A Warning event is recorded when Degraded becomes True, or changes its
//     reason while True (conditions.BecameTrue); never on every write.
//   - A conflict, on the status or on a child, is requeued after a second and
//     is not an error: our copy was stale, and the newer version is on its way.
//     It is never swallowed. With Writer.Live, Finish first looks at the API
//     server's copy: when it describes the same spec (generation), the
//     status is written onto it. After an API server restart the cache can
//     lag for seconds; a status computed for an unchanged spec need not wait
//     for it, nor conflict once a second meanwhile.
//   - A failed write of a child is reported in the status first (Degraded, with
//     the API server's reason), then returned, so that it is retried with
//     backoff and the status says why.
//   - A child's name taken by a foreign object is looked at again every
//     ClashRecheck: the foreign object is not in the cache, so its deletion
//     sends no event.
//   - An object deleted while it was reconciled (its owner's garbage
//     collection, say) needs no status: the write's NotFound ends the
//     reconcile without an error.
package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
)

// Object is an object whose status the operator writes. Every kind of the
// operator's API implements it.
type Object interface {
	client.Object
	// GetConditions returns the status conditions.
	GetConditions() []metav1.Condition
}

// ClashRecheck is how often an owner whose child's name is taken looks again.
const ClashRecheck = 30 * time.Second

// ConflictRetry is how soon a reconcile that met a conflict runs again, should
// the event of the newer version not come first.
const ConflictRetry = time.Second

// Writer writes statuses and records their events.
type Writer struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Live, when set, reads from the API server: Finish reads an object
	// whose status write conflicted, and writes the status onto it (see the
	// package's policy). Set it only for a kind whose status is a function of
	// its spec and its children, never of its own history (a FooBar's record
	// of its run): a status computed from a stale copy must not overwrite
	// what a later one recorded.
	Live client.Reader
	// Transitions, when set, returns the kind's own events for a status that
	// changed from before to after (a run that ended, say). They are
	// recorded once the status is written, so each is recorded once.
	Transitions func(before, after Object) []Event
}

// Event is an event that a change of status causes.
type Event struct {
	Type, Reason, Action, Note string
}

// Write writes after's status when it differs from before's: after is a copy
// of before with its new status set. It records the Warning event of an
// object that became Degraded. A conflict is returned as is
// (apierrors.IsConflict holds).
func (w Writer) Write(ctx context.Context, before, after Object) error {
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	if err := w.Client.Status().Update(ctx, after); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	if conditions.BecameTrue(before.GetConditions(), after.GetConditions(), conditions.Degraded) {
		c := meta.FindStatusCondition(after.GetConditions(), conditions.Degraded)
		w.Recorder.Eventf(before, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", c.Message)
	}
	if w.Transitions != nil {
		for _, e := range w.Transitions(before, after) {
			w.Recorder.Eventf(before, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
		}
	}
	return nil
}

// Children is what a reconcile did to an object's children
// (internal/objects.Children).
type Children interface {
	// Report records the events of the children written.
	Report()
	// Err is the first write that failed.
	Err() error
	// Clashed reports whether a child's name is taken by a foreign object.
	Clashed() bool
	// Terminating reports whether the object's namespace is being deleted.
	Terminating() bool
}

// Finish ends a reconcile of obj whose children went through kids (nil when
// it has none): it reports the children's events, writes the status that set
// gives a copy of obj, and returns the result by the package's policy.
func Finish[T Object](ctx context.Context, w Writer, obj T, kids Children, set func(T)) (ctrl.Result, error) {
	if kids != nil && kids.Terminating() {
		return ctrl.Result{}, nil // the object goes with its namespace
	}
	after := obj.DeepCopyObject().(T)
	set(after)
	if kids != nil {
		kids.Report()
	}
	statusErr := w.Write(ctx, obj, after)
	if apierrors.IsConflict(statusErr) && w.Live != nil {
		statusErr = onLiveCopy(ctx, w, obj, set, statusErr)
	}
	if apierrors.IsNotFound(statusErr) {
		statusErr = nil // deleted while it was reconciled: it needs no status
	}
	var childErr error
	clashed := false
	if kids != nil {
		childErr, clashed = kids.Err(), kids.Clashed()
	}
	return Result(errors.Join(childErr, statusErr), clashed)
}

// onLiveCopy writes the status that set gives onto the API server's copy of
// obj, whose status write met conflict, if that copy is of obj's generation:
// set computes the status for that spec. Otherwise, or if it cannot be read,
// it returns conflict, and the reconcile is requeued.
func onLiveCopy[T Object](ctx context.Context, w Writer, obj T, set func(T), conflict error) error {
	live := obj.DeepCopyObject().(T)
	if err := w.Live.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil || live.GetGeneration() != obj.GetGeneration() {
		return conflict
	}
	after := live.DeepCopyObject().(T)
	set(after)
	return w.Write(ctx, live, after)
}

// Result is the reconcile result for err, the reconcile's failures joined,
// by the package's policy: a conflict alone is requeued after ConflictRetry,
// another error is returned for a retry with backoff, and a clash is looked
// at again after ClashRecheck.
func Result(err error, clashed bool) (ctrl.Result, error) {
	switch {
	case err != nil && onlyConflicts(err):
		return ctrl.Result{RequeueAfter: ConflictRetry}, nil
	case err != nil:
		return ctrl.Result{}, err
	case clashed:
		return ctrl.Result{RequeueAfter: ClashRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// onlyConflicts reports whether every error joined in err is a conflict.
func onlyConflicts(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyConflicts(e) {
				return false
			}
		}
		return true
	}
	return apierrors.IsConflict(err)
}
