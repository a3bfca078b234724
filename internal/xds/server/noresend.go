package server

import (
	"context"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// noResend is the server's rule for what follows a NACK, around the Tracker,
// which only observes. A state-of-the-world NACK carries the last version the
// proxy accepted, and the cache answers a request whose version differs
// from the current one at once (answer.go): it would send the rejected version
// straight back, and the proxy would reject it again, in a loop. So the
// server reads a NACK as being at the version it rejected: the proxy's next
// response is the next version. Delta streams need no such rule: their
// NACKs do not ask for anything again.
//
// Only the last response of each type is remembered: a request whose
// nonce is an older one is stale, and go-control-plane ignores it.
type noResend struct {
	*Tracker
	mu   sync.Mutex
	sent map[int64]map[string]sent // stream -> type URL -> its last response
}

// sent is a response: its nonce and version.
type sent struct{ nonce, version string }

func newNoResend(t *Tracker) *noResend {
	return &noResend{Tracker: t, sent: map[int64]map[string]sent{}}
}

// OnStreamOpen implements sotw.Callbacks.
func (g *noResend) OnStreamOpen(ctx context.Context, id int64, typeURL string) error {
	g.mu.Lock()
	g.sent[id] = map[string]sent{}
	g.mu.Unlock()
	return g.Tracker.OnStreamOpen(ctx, id, typeURL)
}

// OnStreamClosed implements sotw.Callbacks.
func (g *noResend) OnStreamClosed(id int64, node *corev3.Node) {
	g.mu.Lock()
	delete(g.sent, id)
	g.mu.Unlock()
	g.Tracker.OnStreamClosed(id, node)
}

// OnStreamRequest implements sotw.Callbacks: the tracker sees the request as
// the proxy sent it; the cache sees a NACK at the version it rejected.
func (g *noResend) OnStreamRequest(id int64, r *discoveryv3.DiscoveryRequest) error {
	err := g.Tracker.OnStreamRequest(id, r)
	g.mu.Lock()
	defer g.mu.Unlock()
	if last, ok := g.sent[id][r.GetTypeUrl()]; ok && r.GetResponseNonce() == last.nonce && r.GetErrorDetail() != nil {
		r.VersionInfo = last.version
	}
	return err
}

// OnStreamResponse implements sotw.Callbacks.
func (g *noResend) OnStreamResponse(ctx context.Context, id int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
	g.mu.Lock()
	if m := g.sent[id]; m != nil {
		m[resp.GetTypeUrl()] = sent{nonce: resp.GetNonce(), version: resp.GetVersionInfo()}
	}
	g.mu.Unlock()
	g.Tracker.OnStreamResponse(ctx, id, req, resp)
}
