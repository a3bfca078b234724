package testenv

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
