package server

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// attacker is the address the tests' hostile clients connect from: a
// source of its own, beside the proxies' 127.0.0.1.
var attacker = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// openSocket connects to addr from src, for the test's duration, and sends
// hello, if any.
func openSocket(t *testing.T, src *net.TCPAddr, addr string, hello []byte) net.Conn {
	t.Helper()
	c, err := (&net.Dialer{LocalAddr: src}).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if hello != nil {
		if _, err := c.Write(hello); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// partialHello is the start of a TLS record that announces a ClientHello
// and never brings it: a handshake that stalls.
var partialHello = []byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01}

// closedByServer waits until the server closes c (a read ends), and fails
// after a minute.
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open for a minute", what)
	}
	if err == nil {
		t.Fatalf("%s: the server sent something", what)
	}
}

// connsOf is how many connections the server counts for src.
func connsOf(s *Server, src *net.TCPAddr) int {
	g := s.gate.sources
	g.mu.Lock()
	defer g.mu.Unlock()
	if o := g.sources[src.IP.String()]; o != nil {
		return o.conns
	}
	return 0
}

// limited starts a TLS server with limits changed by change.
func limited(t *testing.T, a pki.Authority, change func(*Limits)) (*Server, string) {
	t.Helper()
	l := DefaultLimits
	change(&l)
	return startTLSServerWith(t, a, func(s *Server) {
		if err := s.SetLimits(l); err != nil {
			t.Fatal(err)
		}
	})
}

// With the connection limit set to N, 2N idle sockets and N sockets whose
// TLS handshake stalls take no connection: while they are all open, a
// proxy of another fleet connects and gets its configuration.
func TestIdleSocketsTakeNoConnection(t *testing.T) {
	const n = 2
	a := newAuthority(t)
	s, addr := limited(t, a, func(l *Limits) { l.MaxConnections = n; l.HandshakeTimeout = 10 * time.Minute })
	mustPublish(t, s, "v1", clusters("a"))
	for range 2 * n {
		openSocket(t, attacker, addr, nil)
	}
	for range n {
		openSocket(t, attacker, addr, partialHello)
	}
	eventually(t, "the server to accept the attackers' sockets", func() bool { return connsOf(s, attacker) == 3*n })

	p := shortProxy(xdstest.Connect(t, dialAs(t, addr, a, "ns", "edge"), fleet, "pod-1", resourcev3.ClusterType))
	if _, names, err := p.NextNames(""); err != nil || len(names) != 1 {
		t.Fatalf("the proxy got %v, %v", names, err)
	}
	if got := connsOf(s, attacker); got != 3*n {
		t.Errorf("the attackers hold %d sockets, want %d: the proxy was not served beside them", got, 3*n)
	}
}

// A handshake that stalls, or never starts, is closed by the server after
// the handshake timeout, and counted.
func TestStalledHandshakesAreClosed(t *testing.T) {
	a := newAuthority(t)
	s, addr := limited(t, a, func(l *Limits) { l.HandshakeTimeout = 200 * time.Millisecond })
	refused := refusals(t, refusedHandshake)
	idle := openSocket(t, attacker, addr, nil)
	stalled := openSocket(t, attacker, addr, partialHello)
	closedByServer(t, idle, "an idle socket")
	closedByServer(t, stalled, "a stalled handshake")
	eventually(t, "the server to forget them", func() bool { return connsOf(s, attacker) == 0 })
	if got := refusals(t, refusedHandshake) - refused; got < 2 {
		t.Errorf("%v failed handshakes counted, want 2", got)
	}
}

// A source holds at most MaxConnectionsPerSource connections: one more is
// closed at once, while another source is served.
func TestConnectionsPerSource(t *testing.T) {
	a := newAuthority(t)
	s, addr := limited(t, a, func(l *Limits) { l.MaxConnectionsPerSource = 3; l.HandshakeTimeout = 10 * time.Minute })
	mustPublish(t, s, "v1", clusters("a"))
	refused := refusals(t, refusedSourceConnections)
	for range 3 {
		openSocket(t, attacker, addr, nil)
	}
	eventually(t, "the server to accept three sockets", func() bool { return connsOf(s, attacker) == 3 })
	closedByServer(t, openSocket(t, attacker, addr, nil), "a fourth socket")
	if got := refusals(t, refusedSourceConnections) - refused; got != 1 {
		t.Errorf("%v refusals counted, want 1", got)
	}
	p := shortProxy(xdstest.Connect(t, dialAs(t, addr, a, "ns", "edge"), fleet, "pod-1", resourcev3.ClusterType))
	if _, err := p.Next(""); err != nil {
		t.Fatalf("a proxy of another source: %v", err)
	}
}

// A source opens at most HandshakesPerSecondPerSource connections a second.
func TestHandshakesPerSource(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAuthority(t)
	s, addr := startTLSServerWith(t, a, func(s *Server) {
		l := DefaultLimits
		l.HandshakesPerSecondPerSource, l.HandshakeTimeout = 2, 10*time.Minute
		if err := s.SetLimits(l); err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	})
	refused := refusals(t, refusedSourceHandshakes)
	openSocket(t, attacker, addr, nil)
	openSocket(t, attacker, addr, nil)
	closedByServer(t, openSocket(t, attacker, addr, nil), "a third socket in the same second")
	if got := refusals(t, refusedSourceHandshakes) - refused; got != 1 {
		t.Errorf("%v refusals counted, want 1", got)
	}
	if got := connsOf(s, attacker); got != 2 {
		t.Errorf("the server holds %d sockets of the source, want 2", got)
	}
	mu.Lock()
	clock = clock.Add(time.Second)
	mu.Unlock()
	// A second later, the source may open two more.
	openSocket(t, attacker, addr, nil)
	eventually(t, "a socket opened a second later to be kept", func() bool { return connsOf(s, attacker) == 3 })
}

// The sources the server remembers are those that hold something: a
// thousand sources that came and went leave next to nothing.
func TestSourcesAreForgotten(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := DefaultLimits
	l.HandshakesPerSecondPerSource = 10
	s := newSourceLimits(l, func() time.Time { return clock })
	for i := range 1000 {
		src := fmt.Sprintf("10.0.%d.%d", i/256, i%256)
		if reason := s.admit(src); reason != "" {
			t.Fatalf("%s: %s", src, reason)
		}
		s.release(src)
		clock = clock.Add(time.Millisecond)
	}
	// Their handshakes come back within a second; the next sweep forgets them.
	clock = clock.Add(sweepEvery)
	s.admit("10.1.0.1")
	if got := s.tracked(); got != 1 {
		t.Errorf("%d sources remembered after a thousand came and went, want the one that holds a connection", got)
	}
	// A source that holds a connection is remembered, and its limit holds.
	s = newSourceLimits(l, func() time.Time { return clock })
	for range 10 {
		s.admit("10.0.0.1")
	}
	if reason := s.admit("10.0.0.1"); reason != refusedSourceHandshakes {
		t.Errorf("an eleventh handshake in the same instant: %q, want %q", reason, refusedSourceHandshakes)
	}
}

// A stream that subscribes to more names than it may is ended with
// ResourceExhausted, over state of the world (names per request) and delta
// (names added up over requests), and the replica serves on. So is a
// request larger than MaxRequestBytes; an empty name is refused.
func TestNamesPerStream(t *testing.T) {
	a := newAuthority(t)
	s, addr := limited(t, a, func(l *Limits) { l.MaxNamesPerType = 100 })
	mustPublish(t, s, "v1", clusters("a"))
	c := dialAs(t, addr, a, "ns", "edge")
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return out
	}
	refused := refusals(t, refusedNames)

	p := shortProxy(xdstest.Connect(t, c, fleet, "sotw", resourcev3.EndpointType, names("c", 101)...))
	_, err := p.Next("")
	wantCode(t, "101 names in one request", err, codes.ResourceExhausted)

	d := xdstest.OpenDelta(t, c, fleet, "delta")
	var derr error
	for i := range 20 {
		if derr = d.Subscribe(resourcev3.EndpointType, names(fmt.Sprintf("r%d-", i), 15)...); derr != nil {
			break
		}
	}
	for { // the stream's status, once it ends
		if _, derr = d.Recv(); derr != nil {
			break
		}
	}
	wantCode(t, "15 names at a time", derr, codes.ResourceExhausted)
	if got := refusals(t, refusedNames) - refused; got != 2 {
		t.Errorf("%v refusals counted, want 2", got)
	}

	// A million names do not fit in a request.
	huge := shortProxy(xdstest.Connect(t, c, fleet, "huge", resourcev3.EndpointType, names("", 1_000_000)...))
	_, err = huge.Next("")
	wantCode(t, "a million names", err, codes.ResourceExhausted)

	empty := shortProxy(xdstest.Connect(t, c, fleet, "empty", resourcev3.EndpointType, "a", ""))
	_, err = empty.Next("")
	wantCode(t, "an empty name", err, codes.InvalidArgument)

	// The replica serves on.
	q := shortProxy(xdstest.Connect(t, c, fleet, "pod", resourcev3.ClusterType))
	if _, err := q.Next(""); err != nil {
		t.Fatal(err)
	}
}

// What the server keeps of a stream is bounded by its types, whatever the
// stream sends: a delta client that never answers, and asks 2000 times for
// something new, leaves one response of each type remembered.
func TestStreamStateIsBounded(t *testing.T) {
	s, addr := startServer(t)
	mustPublish(t, s, "v1", clusters("a"))
	d := xdstest.OpenDelta(t, xdstest.Dial(t, addr), fleet, "pod")
	const rounds = 2000
	for i := range rounds {
		// A name the fleet does not hold: each request is answered (as
		// removed), and the client answers none.
		if err := d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType,
			ResourceNamesSubscribe: []string{fmt.Sprintf("n%d", i)}, ResourceNamesUnsubscribe: prev(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	tr := s.Tracker()
	// A record keeps one response of each type served, in an array, and
	// the names of at most maxUnservedTypes others.
	streams := streamsOf(tr)
	if len(streams) != 1 {
		t.Errorf("%d stream records for one stream", len(streams))
	}
	for _, st := range streams {
		if n := len(st.unserved); n > maxUnservedTypes {
			t.Errorf("stream %d: %d types not served remembered after %d rounds", st.id, n, rounds)
		}
	}
}

// prev unsubscribes round i's stream from the name of the round before.
func prev(i int) []string {
	if i == 0 {
		return nil
	}
	return []string{fmt.Sprintf("n%d", i-1)}
}
