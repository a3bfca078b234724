// Package resync keeps the turn of objects that a controller's watch could
// not map an event to.
//
// A failed read must not lose an object's turn. A watch's map from an event
// to the requests it concerns often Lists the cache, and a handler cannot
// return an error. When such a List fails, the handler logs the error and
// returns a resync (Request) instead of the requests it could not find: the
// controller's Reconcile recognises it (Is), lists the objects again and
// queues each (Queue), and returns a failure there, so that the workqueue
// retries the resync with its rate-limited backoff. A retry inside the
// handler would instead hold up every later event of the informer it runs
// on, and a goroutine per failure would pile up while the API server or the
// cache misbehaves; a queued resync is one per namespace however many
// events fail (the queue folds equal requests), is retried at the queue's
// pace, and shows in the controller's metrics. What it costs is one more
// reconcile of each of the objects, which writes nothing when one is
// settled.
package resync

import (
	"context"
	"errors"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Request stands for every object of namespace ns that a controller
// reconciles, or of every namespace (and every cluster-scoped one) when ns
// is "": it names no object, since no object has an empty name.
func Request(ns string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns}}
}

// Is reports whether req is a Request.
func Is(req reconcile.Request) bool { return req.Name == "" }

// Queue is a controller's queue, once its sources have started, where the
// reconcile of a resync queues the objects it stands for.
type Queue struct {
	q atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// Source is a source for the controller's builder (WatchesRawSource) that
// keeps the controller's queue in q when the controller starts.
func (q *Queue) Source() source.Source {
	return source.Func(func(_ context.Context, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Set(wq)
		return nil
	})
}

// Set makes wq the queue.
func (q *Queue) Set(wq workqueue.TypedRateLimitingInterface[reconcile.Request]) { q.q.Store(&wq) }

// Add queues reqs; it fails when the controller has not started.
func (q *Queue) Add(reqs ...reconcile.Request) error {
	wq := q.q.Load()
	if wq == nil {
		return errors.New("resyncing: the controller's queue is not started")
	}
	for _, req := range reqs {
		(*wq).Add(req)
	}
	return nil
}
