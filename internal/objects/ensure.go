package objects

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Outcome says what Ensure did.
type Outcome int

const (
	// Unchanged: the object already had every field the owner sets. Nothing was written.
	Unchanged Outcome = iota
	// Created: the object did not exist and was created.
	Created
	// Updated: the object had drifted and was updated.
	Updated
	// Clash: an object of that name exists and is not controlled by the owner.
	// It was left alone.
	Clash
)

func (o Outcome) String() string {
	return [...]string{"Unchanged", "Created", "Updated", "Clash"}[o]
}

// Child describes how to reconcile one kind of child object.
type Child[T client.Object] struct {
	// Kind names the child's kind in events, logs and conditions.
	Kind string
	// CreatedReason is the reason of the event that reports a create:
	// conditions.EventCreated unless set.
	CreatedReason string
	// Matches reports whether existing already has every field desired sets.
	Matches func(existing, desired T) (bool, error)
	// Merge returns existing with desired's fields put back, keeping what
	// others added. It must not modify its arguments. A child whose Matches
	// always holds is create-only, and needs no Merge.
	Merge func(existing, desired T) T
}

// Ensure makes the child desired exist as owner's, with the fields desired
// sets. desired must carry owner's controller reference. It reads through c
// (the cache, which holds only objects labelled as ours) and, when a create
// finds the name taken by an object the cache does not hold, through live.
//
// It sends a write only when something differs, and never modifies an object
// that owner does not control. It returns the object as last seen (nil on Clash).
func (c Child[T]) Ensure(ctx context.Context, cl client.Client, live client.Reader, owner metav1.Object, desired T) (T, Outcome, error) {
	var zero T
	key := client.ObjectKeyFromObject(desired)
	existing := desired.DeepCopyObject().(T)
	err := cl.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		err = cl.Create(ctx, desired)
		if err == nil {
			return desired, Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return zero, Unchanged, fmt.Errorf("creating %s %q: %w", c.Kind, key.Name, err)
		}
		// It exists but is not in the cache: someone else's, or ours with its label removed.
		existing = desired.DeepCopyObject().(T)
		if err := live.Get(ctx, key, existing); err != nil {
			return zero, Unchanged, fmt.Errorf("reading %s %q: %w", c.Kind, key.Name, err)
		}
	} else if err != nil {
		return zero, Unchanged, fmt.Errorf("reading %s %q: %w", c.Kind, key.Name, err)
	}

	if !metav1.IsControlledBy(existing, owner) {
		return zero, Clash, nil
	}
	same, err := c.Matches(existing, desired)
	if err != nil {
		return zero, Unchanged, fmt.Errorf("comparing %s %q: %w", c.Kind, key.Name, err)
	}
	if same {
		return existing, Unchanged, nil
	}
	updated := c.Merge(existing, desired)
	// The update carries existing's resourceVersion: if the object changed
	// since we read it, the API server refuses, and we look again.
	if err := cl.Update(ctx, updated); err != nil {
		return zero, Unchanged, fmt.Errorf("updating %s %q: %w", c.Kind, key.Name, err)
	}
	return updated, Updated, nil
}

// DeleteRenamed deletes the objects in owner's namespace that owner controls
// and whose name is not keep: what is left after the owner's spec renamed its
// child. list is an empty list of the child kind; objects must be indexed
// with IndexByController. It returns the names it deleted.
func DeleteRenamed(ctx context.Context, cl client.Client, owner metav1.Object, list client.ObjectList, keep string) ([]string, error) {
	if err := cl.List(ctx, list, client.InNamespace(owner.GetNamespace()),
		client.MatchingFields{ControllerUIDIndex: string(owner.GetUID())}); err != nil {
		return nil, fmt.Errorf("listing owned %T: %w", list, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok || obj.GetName() == keep || !metav1.IsControlledBy(obj, owner) || obj.GetDeletionTimestamp() != nil {
			continue // kept, not ours, or already on its way out
		}
		uid := obj.GetUID()
		err := cl.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if client.IgnoreNotFound(err) != nil {
			return deleted, fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
		}
		deleted = append(deleted, obj.GetName())
	}
	return deleted, nil
}
