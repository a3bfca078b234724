package server

import (
	"errors"
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/credentials"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/cache"
)

// Limits bound what clients may open on the xDS server, so that no client
// can exhaust it for the others.
type Limits struct {
	// MaxConnections bounds the server's connections that have completed
	// their handshake: a connection counts once its TLS handshake is done
	// (plaintext: once accepted). One beyond it is closed then: its client
	// retries, with backoff, as a proxy does on any lost connection.
	MaxConnections int
	// MaxStreamsPerConnection bounds the concurrent streams of one
	// connection (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS). Envoy opens one
	// ADS stream per connection.
	MaxStreamsPerConnection int
	// HandshakeTimeout bounds a connection's set-up, its TLS handshake and
	// HTTP/2's first frames: a connection not set up by then is closed.
	HandshakeTimeout time.Duration
	// MaxConnectionsPerSource bounds the connections of one remote IP
	// address, in set-up or set up; one beyond it is closed as soon as it
	// is accepted.
	MaxConnectionsPerSource int
	// HandshakesPerSecondPerSource bounds how many connections one remote
	// IP address may open per second (as many at once); one beyond it is
	// closed as soon as it is accepted.
	HandshakesPerSecondPerSource int
	// MaxRequestBytes bounds one request's size (gRPC's MaxRecvMsgSize): a
	// larger one ends its stream with ResourceExhausted.
	MaxRequestBytes int
	// MaxNamesPerType bounds the resource names one stream subscribes to,
	// per type: in one state-of-the-world request, or accumulated over a
	// delta stream's requests. Their length is bounded too: MaxRequestBytes
	// in all, per type. Beyond either, the stream ends with ResourceExhausted.
	MaxNamesPerType int
}

// DefaultLimits are the server's limits unless set otherwise: room for
// thousands of proxies per replica, a few streams each. A source may hold
// a tenth of the connections: the proxies behind one address (a node's
// host-network pods, an SNAT gateway) are rarely more, and ten sources are
// needed to fill a replica. 100 handshakes a second reconnect a thousand
// proxies behind one address in ten seconds; a source that never completes
// them holds at most as many sockets, over the 10 seconds a handshake may
// take. Those 10 seconds leave room for a replica that 10,000 proxies
// reconnect to at once.
var DefaultLimits = Limits{
	MaxConnections:               10000,
	MaxStreamsPerConnection:      100,
	HandshakeTimeout:             10 * time.Second,
	MaxConnectionsPerSource:      1000,
	HandshakesPerSecondPerSource: 100,
	MaxRequestBytes:              4 << 20,
	MaxNamesPerType:              10000,
}

// Check reports limits that allow nothing.
func (l Limits) Check() error {
	var errs []error
	if l.MaxConnections < 1 {
		errs = append(errs, errors.New("the connection limit must be at least 1"))
	}
	if l.MaxStreamsPerConnection < 1 || l.MaxStreamsPerConnection > math.MaxUint32 {
		errs = append(errs, errors.New("the stream limit per connection must be at least 1, and fit HTTP/2's 32 bits"))
	}
	if l.HandshakeTimeout <= 0 {
		errs = append(errs, errors.New("the handshake timeout must be positive"))
	}
	if l.MaxConnectionsPerSource < 1 {
		errs = append(errs, errors.New("the connection limit per source must be at least 1"))
	}
	if l.HandshakesPerSecondPerSource < 1 {
		errs = append(errs, errors.New("the handshakes per second per source must be at least 1"))
	}
	if l.MaxRequestBytes < 1024 {
		errs = append(errs, errors.New("the request size limit must be at least 1024 bytes"))
	}
	if l.MaxNamesPerType < 1 {
		errs = append(errs, errors.New("the names per type must be at least 1"))
	}
	return errors.Join(errs...)
}

// names is what a stream may subscribe to, per type.
func (l Limits) names() cache.NameLimits {
	return cache.NameLimits{Count: l.MaxNamesPerType, Bytes: l.MaxRequestBytes}
}

// SetLimits sets the server's limits; call it before Start.
func (s *Server) SetLimits(l Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	s.limits = l
	s.cache.SetNames(l.names())
	return nil
}

// connGate is the server's listener: it refuses a connection from a source
// beyond its limits as soon as it is accepted, and gives each connection
// one of MaxConnections slots once its handshake is done (gatedCreds).
type connGate struct {
	net.Listener
	slots   chan struct{} // one element per connection set up
	sources *sourceLimits
}

func newConnGate(l net.Listener, lim Limits, now func() time.Time) *connGate {
	return &connGate{Listener: l, slots: make(chan struct{}, lim.MaxConnections), sources: newSourceLimits(lim, now)}
}

// Accept returns the next connection its source may open.
func (g *connGate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		if reason := g.sources.admit(src); reason != "" {
			metricRefused.WithLabelValues(reason).Inc()
			_ = c.Close()
			continue
		}
		return &gatedConn{Conn: c, gate: g, source: src}, nil
	}
}

// sourceOf is the remote IP address of a connection.
func sourceOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}

// gatedConn is an accepted connection: it gives its source's count back,
// and its slot if it has one, when it is closed, once.
type gatedConn struct {
	net.Conn
	gate   *connGate
	source string

	mu           sync.Mutex
	slot, closed bool
}

// admit takes a slot for the connection, whose handshake is done; it
// reports false when there is none left (or the connection is closed).
func (c *gatedConn) admit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	select {
	case c.gate.slots <- struct{}{}:
		c.slot = true
		return true
	default:
		return false
	}
}

func (c *gatedConn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		if c.slot {
			<-c.gate.slots
		}
		c.gate.sources.release(c.source)
	}
	return err
}

// errConnectionLimit closes a connection beyond MaxConnections.
var errConnectionLimit = errors.New("the xDS server holds as many connections as it may")

// gatedCreds are the server's transport credentials (TLS, or plaintext),
// that count a connection against MaxConnections once its handshake is
// done. gRPC bounds the handshake by HandshakeTimeout.
type gatedCreds struct {
	credentials.TransportCredentials
}

// ServerHandshake implements credentials.TransportCredentials.
func (g gatedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := g.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		metricRefused.WithLabelValues(refusedHandshake).Inc()
		return nil, nil, err
	}
	if c, ok := raw.(*gatedConn); ok && !c.admit() {
		metricRefused.WithLabelValues(refusedConnection).Inc()
		_ = conn.Close()
		return nil, nil, errConnectionLimit
	}
	return conn, info, nil
}

// Clone implements credentials.TransportCredentials.
func (g gatedCreds) Clone() credentials.TransportCredentials {
	return gatedCreds{g.TransportCredentials.Clone()}
}

// sourceLimits counts each source's connections and handshakes.
type sourceLimits struct {
	maxConns int
	rate     rate.Limit
	burst    int
	now      func() time.Time

	mu      sync.Mutex
	sources map[string]*source
	// swept is the number of sources after the last sweep, at sweptAt.
	swept   int
	sweptAt time.Time
}

type source struct {
	conns      int
	handshakes *rate.Limiter
}

func newSourceLimits(l Limits, now func() time.Time) *sourceLimits {
	return &sourceLimits{maxConns: l.MaxConnectionsPerSource, rate: rate.Limit(l.HandshakesPerSecondPerSource),
		burst: l.HandshakesPerSecondPerSource, now: now, sources: map[string]*source{}}
}

// admit counts a new connection of src, and returns "" or, when src may not
// open it, the reason to refuse it (metricRefused's).
func (s *sourceLimits) admit(src string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	o := s.sources[src]
	if o == nil {
		s.sweepLocked(now)
		o = &source{handshakes: rate.NewLimiter(s.rate, s.burst)}
		s.sources[src] = o
	}
	if o.conns >= s.maxConns {
		return refusedSourceConnections
	}
	if !o.handshakes.AllowN(now, 1) {
		return refusedSourceHandshakes
	}
	o.conns++
	return ""
}

// release counts a connection of src closed.
func (s *sourceLimits) release(src string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.sources[src]; o != nil {
		o.conns--
		s.forgetLocked(src, o, s.now())
	}
}

// forgetLocked forgets a source that holds nothing: no connection, and
// handshakes enough for a burst, as a source never seen has.
func (s *sourceLimits) forgetLocked(src string, o *source, now time.Time) {
	if o.conns <= 0 && o.handshakes.TokensAt(now) >= float64(s.burst) {
		delete(s.sources, src)
	}
}

// sweepEvery is how often, at most, sourceLimits looks for sources to
// forget when their number has not grown.
const sweepEvery = 10 * time.Second

// sweepLocked forgets the sources that hold nothing, each time their
// number has doubled since the last sweep, or sweepEvery has passed: their
// memory is bounded by the sources seen lately, for a constant cost per
// admission.
func (s *sourceLimits) sweepLocked(now time.Time) {
	if len(s.sources) < 2*s.swept+64 && now.Sub(s.sweptAt) < sweepEvery {
		return
	}
	for src, o := range s.sources {
		s.forgetLocked(src, o, now)
	}
	s.swept, s.sweptAt = len(s.sources), now
}

// tracked returns how many sources are remembered.
func (s *sourceLimits) tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sources)
}
