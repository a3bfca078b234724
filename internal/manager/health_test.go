package manager

import (
	"context"
	"net/http/httptest"
	"testing"
)

// syncWaiter reports synced, or blocks until the context ends, as a cache does.
type syncWaiter bool

func (s syncWaiter) WaitForCacheSync(ctx context.Context) bool {
	if s {
		return true
	}
	<-ctx.Done()
	return false
}

func TestCacheSynced(t *testing.T) {
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := CacheSynced(syncWaiter(true))(req); err != nil {
		t.Errorf("synced: %v", err)
	}
	if err := CacheSynced(syncWaiter(false))(req); err == nil {
		t.Error("not synced: the check passed")
	}
}
