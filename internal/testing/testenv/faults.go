package testenv

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Faulty returns c with funcs called instead of its methods where they are
// set: a client that fails on demand, for a test of what a controller does
// when a read or a write fails once. c may be the manager's client, which
// reads the cache and its indexes; the Faulty client cannot watch.
func Faulty(c client.Client, funcs interceptor.Funcs) client.Client {
	return interceptor.NewClient(unwatched{c}, funcs)
}

// unwatched is a client.Client as interceptor wraps it: one that refuses to watch.
type unwatched struct{ client.Client }

func (unwatched) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("a Faulty client cannot watch")
}

// FailingLists returns c, whose Lists of any of the kinds of lists fail
// with a server timeout while fail is set: what a controller's watch sees
// when it cannot list the objects an event maps to.
func FailingLists(c client.Client, fail *atomic.Bool, lists ...client.ObjectList) client.Client {
	return Faulty(c, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if fail.Load() && slices.ContainsFunc(lists, func(l client.ObjectList) bool { return reflect.TypeOf(l) == reflect.TypeOf(list) }) {
				return apierrors.NewServerTimeout(schema.GroupResource{Resource: reflect.TypeOf(list).Elem().Name()}, "list", 1)
			}
			return c.List(ctx, list, opts...)
		},
	})
}

// Drain returns what q holds, taking it out: the requests a controller's
// map functions queued.
func Drain(q workqueue.TypedRateLimitingInterface[reconcile.Request]) map[reconcile.Request]bool {
	out := map[reconcile.Request]bool{}
	for q.Len() > 0 {
		req, _ := q.Get()
		out[req] = true
		q.Done(req)
		q.Forget(req)
	}
	return out
}
