package objects

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
)

// Kit is what every controller needs to reconcile: a client that reads from
// the manager's cache, a reader that goes to the API server (only to look at
// an object the cache does not hold because the operator does not own it),
// an event recorder, and the status writer (internal/status) with its policy
// for events and conflicts.
type Kit struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Status    status.Writer
}

// NewKit returns the kit of the named controller on mgr.
func NewKit(mgr ctrl.Manager, controller string) Kit {
	k := Kit{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(controller)}
	k.Status = status.Writer{Client: k.Client, Recorder: k.Recorder}
	return k
}

// Fetch reads the object req names into obj through the cache. It reports
// false, with no error, when there is nothing to reconcile: the object is
// gone, or being deleted (the garbage collector removes its children).
func (k Kit) Fetch(ctx context.Context, req ctrl.Request, obj client.Object) (bool, error) {
	if err := k.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return obj.GetDeletionTimestamp().IsZero(), nil
}

// Children records what one reconcile did to one owner's children: what it
// created, updated and deleted, the names it found taken, and the first write
// that failed. Every child of a reconcile goes through one Children, with
// Ensure and DeleteRenamed; after the first failure, the later children are
// left for the retry.
type Children struct {
	kit   Kit
	ctx   context.Context
	owner client.Object
	// ownerKind names the owner in messages ("Foo", "Envoy").
	ownerKind string

	// created holds the children created, by event reason.
	created          map[string][]string
	updated, deleted []string
	clashes          []string
	err              error
	// terminating is set when the owner's namespace is being deleted: the
	// owner goes with it, and nothing more is created.
	terminating bool
}

// Reconcile starts recording one reconcile of owner's children.
func (k Kit) Reconcile(ctx context.Context, owner client.Object, ownerKind string) *Children {
	return &Children{kit: k, ctx: ctx, owner: owner, ownerKind: ownerKind}
}

// Ensure makes the child desired exist as c's owner's (see Child.Ensure) and
// returns it as last seen. It returns the zero T when the name is taken by
// a foreign object, when the write failed, or when an earlier child's did.
func Ensure[T client.Object](c *Children, child Child[T], desired T) T {
	var zero T
	if c.err != nil || c.terminating {
		return zero
	}
	name := fmt.Sprintf("%s %q", child.Kind, desired.GetName())
	got, outcome, err := child.Ensure(c.ctx, c.kit.Client, c.kit.APIReader, c.owner, desired)
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		c.terminating = true
		return zero
	}
	if err != nil {
		c.err = err
		return zero
	}
	switch outcome {
	case Created:
		reason := cmp.Or(child.CreatedReason, conditions.EventCreated)
		if c.created == nil {
			c.created = map[string][]string{}
		}
		c.created[reason] = append(c.created[reason], name)
	case Updated:
		c.updated = append(c.updated, name)
	case Clash:
		c.clashes = append(c.clashes, name)
		return zero
	}
	return got
}

// DeleteRenamed deletes the children of the kind of list that the owner
// controls under a name other than keep (see DeleteRenamed).
func (c *Children) DeleteRenamed(kind string, list client.ObjectList, keep string) {
	if c.err != nil || c.terminating {
		return
	}
	deleted, err := DeleteRenamed(c.ctx, c.kit.Client, c.owner, list, keep)
	for _, name := range deleted {
		c.deleted = append(c.deleted, fmt.Sprintf("%s %q", kind, name))
	}
	c.err = err
}

// Terminating reports whether the owner's namespace is being deleted: there
// is nothing to report or retry, since the owner goes with it.
func (c *Children) Terminating() bool { return c.terminating }

// Err is the first write that failed, or nil.
func (c *Children) Err() error { return c.err }

// Conflict reports whether the failure is a conflict: our copy of an object
// was stale. The newer version is on its way and reconciles again.
func (c *Children) Conflict() bool { return apierrors.IsConflict(c.err) }

// Clashed reports whether a child's name is taken by a foreign object.
func (c *Children) Clashed() bool { return len(c.clashes) > 0 }

// Problem is why the owner is Degraded because of its children, or nil: a
// failed write first (with the API server's reason), then taken names. A
// conflict is not a problem; it is retried.
func (c *Children) Problem() *conditions.Problem {
	if c.err != nil && !c.Conflict() {
		return conditions.FromError(c.err)
	}
	if len(c.clashes) > 0 {
		return &conditions.Problem{
			Reason: conditions.ResourceExists,
			Message: fmt.Sprintf("%s already exists and is not managed by %s %q",
				strings.Join(c.clashes, ", "), c.ownerKind, c.owner.GetName()),
		}
	}
	return nil
}

// Report logs the children this reconcile wrote and records one Normal event
// per verb (per reason, for creates), whatever the number of children: a
// fleet of three children created at once is one event, not three.
//
// An owner's first children, made before it ever reported a status, are
// logged but not recorded as a Created event: making them is what creating
// the owner asked for, and the status written by the same reconcile
// (Progressing, with the generation) tells of them. An event would cost the
// API server one more write per object created, for nothing a user did not
// already know. A child created again later (someone deleted it) is
// recorded, as are updates, deletions and the kinds' own create reasons (a
// FooBar's run).
func (c *Children) Report() {
	type line struct {
		reason, verb string
		what         []string
	}
	var lines []line
	for _, reason := range slices.Sorted(maps.Keys(c.created)) {
		lines = append(lines, line{reason, "Created", c.created[reason]})
	}
	lines = append(lines,
		line{conditions.EventUpdated, "Updated", c.updated},
		line{conditions.EventDeleted, "Deleted", c.deleted})
	log := logf.FromContext(c.ctx)
	for _, l := range lines {
		if len(l.what) == 0 {
			continue
		}
		msg := l.verb + " " + strings.Join(l.what, ", ")
		log.Info(msg)
		if l.reason == conditions.EventCreated && neverReported(c.owner) {
			continue
		}
		c.kit.Recorder.Eventf(c.owner, nil, corev1.EventTypeNormal, l.reason, l.verb, "%s", msg)
	}
}

// neverReported reports whether owner has no status condition yet: the
// operator has not written its status since it was created.
func neverReported(owner client.Object) bool {
	o, ok := owner.(status.Object)
	return ok && len(o.GetConditions()) == 0
}
