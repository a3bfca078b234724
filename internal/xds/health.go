package xds

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// DefaultStuckAfter is how long the snapshot cache may stay locked before the
// server counts as unable to publish. A publication holds the lock for
// milliseconds, however many proxies it reaches.
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
// or when its snapshot cache has not let a read in for StuckAfter. Every
// publication takes the cache's lock, and go-control-plane's cache may hold
// it while it waits for a stream: a server in that state never publishes
// again, so /healthz fails and the pod is restarted, and /readyz fails, so
// that proxies go to another replica meanwhile. The check never waits long:
// it starts a read of the cache and judges the read in flight, if one is.
// Before the server starts, it passes (readiness waits for Listening).
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
			return fmt.Errorf("the xDS snapshot cache has been locked for %s: no fleet can be published", waited.Truncate(time.Millisecond))
		}
		return nil
	}
	s.probe.inFlight, s.probe.since = true, time.Now()
	go func() {
		s.cache.ping()
		s.probe.mu.Lock()
		s.probe.inFlight = false
		s.probe.mu.Unlock()
	}()
	return nil
}
