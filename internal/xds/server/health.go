package server

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// DefaultStuckAfter is how long a lock of the cache may stay taken before
// the server counts as unable to publish. A publication holds its fleet's lock
// for milliseconds, however many proxies it reaches.
const DefaultStuckAfter = 10 * time.Second

// cacheProbe follows the one read of the cache in flight, if any: a stuck
// cache keeps one probe waiting, never more.
type cacheProbe struct {
	mu       sync.Mutex
	inFlight bool
	since    time.Time // when the probe in flight started
}

// Healthy is a health check: it fails when the server can no longer
// publish. That is when its serve loop has ended while the server should run,
// or when a fleet's lock in its cache has not let the check in for
// StuckAfter. Nothing in the cache waits while it holds one (see
// cache.Cache); the check is there for what nobody foresaw: a server in
// that state never publishes that fleet again, so /healthz fails and the
// pod is restarted, and /readyz fails, so that proxies go to another
// replica meanwhile. The check never waits long: it starts a walk of the locks and
// judges the walk in flight, if one is. Before the server starts, it passes
// (readiness waits for Listening).
func (s *Server) Healthy(*http.Request) error {
	select {
	case <-s.ready:
	default:
		return nil
	}
	if s.serveEnded.Load() {
		return fmt.Errorf("the xDS server no longer serves")
	}
	s.probe.mu.Lock()
	defer s.probe.mu.Unlock()
	if s.probe.inFlight {
		if waited := time.Since(s.probe.since); waited >= s.stuckAfter {
			return fmt.Errorf("the xDS cache has been locked for %s: a fleet cannot be published", waited.Truncate(time.Millisecond))
		}
		return nil
	}
	s.probe.inFlight, s.probe.since = true, time.Now()
	go func() {
		s.cache.Ping()
		s.probe.mu.Lock()
		s.probe.inFlight = false
		s.probe.mu.Unlock()
	}()
	return nil
}
