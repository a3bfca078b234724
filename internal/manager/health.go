package manager

import (
	"context"
	"errors"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// SyncWaiter is the part of a cache that CacheSynced needs.
type SyncWaiter interface {
	WaitForCacheSync(ctx context.Context) bool
}

// CacheSynced is a readiness check: it fails until the cache has started and
// every informer in it has synced. It waits at most a second, so that the
// probe answers well within its timeout.
func CacheSynced(c SyncWaiter) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informers have not synced yet")
		}
		return nil
	}
}
