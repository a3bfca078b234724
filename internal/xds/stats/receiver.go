// Package stats receives what a fleet's proxies serve, from the proxies
// themselves: Envoy's metrics service (envoy.service.metrics.v3.
// MetricsService/StreamMetrics), which each proxy's stats sink streams to
// the operator over the fleet's own mutual TLS identity (Sink declares it
// in a bootstrap). The Receiver keeps, per proxy, running totals of a small
// fixed inclusion list of counters and one histogram, by scope: an HTTP
// connection manager's stat prefix ("http:PREFIX") or an upstream cluster
// ("cluster:NAME"). A rollout marks them when a step begins and judges the
// window with package analysis (Window).
//
// A stats stream is authenticated as an ADS stream is: over mutual TLS,
// its fleet is the one its verified client certificate names
// (pki.PeerFleet, the check the xDS server makes); its first message
// must name the node, whose cluster must be that fleet; and a later
// message that names another node, or another fleet, ends the stream. A
// proxy thus reports only as a proxy of its own fleet, and a stream only
// ever as one node. As with ADS, the certificate is the fleet's, not the
// pod's: within a fleet, the node id is the proxy's own claim.
//
// What is kept is bounded: per proxy, at most MaxScopes scopes of fixed
// size; per fleet, at most MaxFleetProxies proxies, and at most MaxProxies
// in all (a new one evicts the proxy of its own fleet longest silent among
// those without a stream, so that one fleet's proxies never evict
// another's, or is refused); at most MaxStreams streams at once. A proxy
// without a stream that sent nothing for Grace left its fleet (its pod is
// gone, or it reports to another replica now) and is forgotten. Anything
// off the inclusion list, or past a bound, is dropped and counted, in the
// Receiver and in its metrics.
//
// While a fleet rolls out, the Receiver keeps where each of its proxies'
// windows begins (Marks), and the server reports the windows
// (Receiver.Windows) with its proxies' answers, but for the scopes of the
// proxies' own bootstrap (Options.Own); WindowsChanged tells it when a
// flush changed them, at most once per WindowInterval a fleet. A proxy's
// stats stream and its ADS stream share one connection (Sink), so that
// its stats come to the replica that serves it.
package stats

import (
	"errors"
	"io"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// Options bound and configure a Receiver.
type Options struct {
	// TrustDomain is that of the fleets' client certificates; "" in
	// plaintext, where nothing is verified (a local experiment only).
	TrustDomain string
	// MaxStreams bounds the streams open at once.
	MaxStreams int
	// MaxProxies bounds the proxies whose figures are kept, and
	// MaxFleetProxies those of one fleet.
	MaxProxies, MaxFleetProxies int
	// MaxScopes bounds the scopes kept per proxy.
	MaxScopes int
	// Grace is how long a proxy without a stream is kept after its last
	// message.
	Grace time.Duration
	// WindowInterval is the least time between two figurings of a rolling
	// fleet's windows (Marks): the proxies' flush interval.
	WindowInterval time.Duration
	// Own are the scopes left out of the windows: those of the proxies'
	// own bootstrap (BootstrapScopes).
	Own []string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DefaultOptions bound a Receiver for fleets of thousands of proxies. A
// proxy's record holds at most MaxScopes scopes of 4 counters and 20
// buckets (192 bytes each: 6 KiB at 32) and their names (at most 256
// bytes each); a proxy has a scope per listener and per cluster it serves
// through, a few as a rule. A fleet may have as many proxies as a
// replica keeps, less a tenth for the others'. A proxy silent for three
// minutes, eighteen flushes, is gone.
var DefaultOptions = Options{MaxStreams: 10000, MaxProxies: 10000, MaxFleetProxies: 9000, MaxScopes: 32,
	Grace: 3 * time.Minute, WindowInterval: DefaultFlushInterval}

// maxNodeID bounds a node id (a pod's name is never longer), and
// maxScopeName a scope's name.
const (
	maxNodeID    = 253
	maxScopeName = 256
)

// Key names a proxy: its fleet (node.cluster, namespace/name) and node id.
type Key struct{ Fleet, Node string }

func (k Key) String() string { return k.Fleet + "/" + k.Node }

// Report is what a Receiver holds of one proxy: running totals by scope,
// since the Receiver first heard of it.
type Report struct {
	Key
	// Scopes are the running totals, by scope.
	Scopes map[string]analysis.Figures
	// Reports counts the messages received; First and Last are when the
	// first and the last came.
	Reports     uint64
	First, Last time.Time
	// Connected is set while the proxy has a stream open.
	Connected bool
	// Dropped counts the metrics dropped: off the inclusion list, malformed,
	// or past MaxScopes.
	Dropped uint64
}

// record is a proxy's Report, as the Receiver keeps it.
type record struct {
	scopes      map[string]*analysis.Figures
	reports     uint64
	first, last time.Time
	dropped     uint64
	stream      uint64 // the proxy's current stream; 0 without one
}

// Receiver serves Envoy's MetricsService and keeps what it receives.
type Receiver struct {
	metricsv3.UnimplementedMetricsServiceServer
	o Options

	mu         sync.Mutex
	streams    int
	lastStream uint64
	proxies    map[Key]*record
	// fleets counts the proxies kept, by fleet.
	fleets map[string]int
	// swept is when the proxies gone were last forgotten (sweepLocked).
	swept time.Time
	// refused counts the streams refused, by reason.
	refused map[string]uint64
	// marks are where the windows of the rolling fleets' proxies begin;
	// windows is signalled when a flush is due to change them.
	marks   *Marks
	windows chan struct{}
}

// New returns a Receiver bounded by o (a zero bound is DefaultOptions').
func New(o Options) *Receiver {
	d := DefaultOptions
	if o.MaxStreams <= 0 {
		o.MaxStreams = d.MaxStreams
	}
	if o.MaxProxies <= 0 {
		o.MaxProxies = d.MaxProxies
	}
	if o.MaxFleetProxies <= 0 {
		o.MaxFleetProxies = min(d.MaxFleetProxies, o.MaxProxies)
	}
	if o.MaxScopes <= 0 {
		o.MaxScopes = d.MaxScopes
	}
	if o.Grace <= 0 {
		o.Grace = d.Grace
	}
	if o.WindowInterval <= 0 {
		o.WindowInterval = d.WindowInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Receiver{o: o, proxies: map[Key]*record{}, fleets: map[string]int{}, refused: map[string]uint64{},
		marks: NewMarks(o.WindowInterval, o.Own...), windows: make(chan struct{}, 1)}
}

// Register serves the Receiver on s: on the xDS server's port, the one
// the fleets' bootstraps name.
func (r *Receiver) Register(s *grpc.Server) { metricsv3.RegisterMetricsServiceServer(s, r) }

// Reasons a stream is refused, as Refused counts them.
const (
	// RefusedCertificate: no verified client certificate of a fleet.
	RefusedCertificate = "certificate"
	// RefusedIdentity: the node is missing, or not of the certificate's
	// fleet, or another than the stream's.
	RefusedIdentity = "identity"
	RefusedStreams  = "streams"
	// RefusedProxies: MaxProxies are kept, each with a stream or of another
	// fleet; RefusedFleetProxies: MaxFleetProxies of its fleet are kept,
	// each with a stream.
	RefusedProxies      = "proxies"
	RefusedFleetProxies = "fleet_proxies"
	RefusedReplaced     = "replaced"
)

// Refused returns how many streams were refused for reason.
func (r *Receiver) Refused(reason string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[reason]
}

func (r *Receiver) refuse(reason string, err error) error {
	r.mu.Lock()
	r.refusedLocked(reason)
	r.mu.Unlock()
	return err
}

func (r *Receiver) refusedLocked(reason string) {
	r.refused[reason]++
	metricRefused.WithLabelValues(reason).Inc()
}

// StreamMetrics implements the MetricsService: it keeps what the stream's
// proxy reports, as itself, until the stream ends. It never answers.
func (r *Receiver) StreamMetrics(s metricsv3.MetricsService_StreamMetricsServer) error {
	certFleet, err := pki.PeerFleet(s.Context(), r.o.TrustDomain)
	if err != nil {
		return r.refuse(RefusedCertificate, status.Error(codes.PermissionDenied, err.Error()))
	}
	r.mu.Lock()
	if r.streams >= r.o.MaxStreams {
		r.refusedLocked(RefusedStreams)
		r.mu.Unlock()
		return status.Errorf(codes.ResourceExhausted, "the receiver holds as many stats streams as it may (%d)", r.o.MaxStreams)
	}
	r.streams++
	metricStreams.Inc()
	r.lastStream++
	id := r.lastStream
	r.mu.Unlock()
	var key Key
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.streams--
		metricStreams.Dec()
		if rec := r.proxies[key]; rec != nil && rec.stream == id {
			rec.stream = 0
		}
	}()
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return s.SendAndClose(&metricsv3.StreamMetricsResponse{})
		}
		if err != nil {
			return err
		}
		if key == (Key{}) {
			if key, err = r.admit(id, certFleet, m.GetIdentifier().GetNode()); err != nil {
				return err
			}
		} else if n := m.GetIdentifier().GetNode(); n != nil && (n.GetId() != key.Node || n.GetCluster() != key.Fleet) {
			return r.refuse(RefusedIdentity, status.Errorf(codes.PermissionDenied, "the stream's node changed from %s to %s/%s", key, n.GetCluster(), n.GetId()))
		}
		if err := r.keep(id, key, m); err != nil {
			return err
		}
	}
}

// admit checks the node of a stream's first message and makes the stream
// its proxy's current one.
func (r *Receiver) admit(id uint64, certFleet string, node *corev3.Node) (Key, error) {
	switch {
	case node.GetId() == "" || node.GetCluster() == "":
		return Key{}, r.refuse(RefusedIdentity, status.Error(codes.InvalidArgument, "the stream's first message must name the node: its id, and its fleet as node.cluster"))
	case len(node.GetId()) > maxNodeID:
		return Key{}, r.refuse(RefusedIdentity, status.Errorf(codes.InvalidArgument, "node id longer than %d bytes", maxNodeID))
	case certFleet != "" && node.GetCluster() != certFleet:
		return Key{}, r.refuse(RefusedIdentity, status.Errorf(codes.PermissionDenied, "node.cluster %q is not the fleet of the client certificate, %q", node.GetCluster(), certFleet))
	}
	key := Key{Fleet: node.GetCluster(), Node: node.GetId()}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.proxies[key]
	if rec == nil {
		now := r.o.Now()
		r.sweepLocked(now)
		if r.fleets[key.Fleet] >= r.o.MaxFleetProxies && !r.evictLocked(key.Fleet) {
			r.refusedLocked(RefusedFleetProxies)
			return Key{}, status.Errorf(codes.ResourceExhausted, "the receiver keeps the figures of as many proxies of fleet %s as it may (%d)", key.Fleet, r.o.MaxFleetProxies)
		}
		if len(r.proxies) >= r.o.MaxProxies && !r.evictLocked(key.Fleet) {
			r.refusedLocked(RefusedProxies)
			return Key{}, status.Errorf(codes.ResourceExhausted, "the receiver keeps the figures of as many proxies as it may (%d)", r.o.MaxProxies)
		}
		rec = &record{scopes: map[string]*analysis.Figures{}, first: now}
		r.proxies[key] = rec
		r.fleets[key.Fleet]++
		metricProxies.Inc()
	}
	// A proxy's newest stream is its current one: Envoy opens a new stream
	// when it finds its old one dead, and the old one ends at its next
	// message (keep).
	rec.stream = id
	return key, nil
}

// evictLocked forgets the proxy of fleet without a stream that reported
// least recently, and reports whether there was one. A proxy of another
// fleet is never evicted: it is forgotten once silent for Grace.
func (r *Receiver) evictLocked(fleet string) bool {
	if r.fleets[fleet] == 0 {
		return false
	}
	var oldest Key
	var at time.Time
	found := false
	for k, rec := range r.proxies {
		if k.Fleet == fleet && rec.stream == 0 && (!found || rec.last.Before(at)) {
			oldest, at, found = k, rec.last, true
		}
	}
	if found {
		r.forgetLocked(oldest, forgottenEvicted)
	}
	return found
}

// sweepLocked forgets the proxies without a stream silent for Grace, at
// most once per tenth of it: they left their fleet.
func (r *Receiver) sweepLocked(now time.Time) {
	if now.Sub(r.swept) < r.o.Grace/10 {
		return
	}
	r.swept = now
	for k, rec := range r.proxies {
		last := rec.last
		if last.IsZero() {
			last = rec.first
		}
		if rec.stream == 0 && now.Sub(last) >= r.o.Grace {
			r.forgetLocked(k, forgottenSilent)
		}
	}
}

// forgetLocked drops a proxy's record, counted by why.
func (r *Receiver) forgetLocked(k Key, why string) {
	if _, ok := r.proxies[k]; !ok {
		return
	}
	delete(r.proxies, k)
	if r.fleets[k.Fleet]--; r.fleets[k.Fleet] <= 0 {
		delete(r.fleets, k.Fleet)
	}
	metricProxies.Dec()
	metricForgotten.WithLabelValues(why).Inc()
}

// keep adds a message's figures to its proxy's record.
func (r *Receiver) keep(id uint64, key Key, m *metricsv3.StreamMetricsMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.proxies[key]
	if rec == nil || rec.stream != id {
		// Forgotten, or replaced by a newer stream of the same proxy.
		r.refusedLocked(RefusedReplaced)
		return status.Errorf(codes.Aborted, "%s has a newer stats stream", key)
	}
	now := r.o.Now()
	rec.reports++
	rec.last = now
	dropped := rec.dropped
	defer func() {
		if d := rec.dropped - dropped; d > 0 {
			metricDropped.Add(float64(d))
		}
		r.sweepLocked(now)
		if r.marks.Due(key.Fleet, now) {
			select {
			case r.windows <- struct{}{}:
			default: // a signal is pending
			}
		}
	}()
	for _, fam := range m.GetEnvoyMetrics() {
		for _, mt := range fam.GetMetric() {
			s, ok := parse(fam.GetName(), fam.GetType(), mt)
			if !ok {
				rec.dropped++
				continue
			}
			if s.heartbeat {
				continue
			}
			f := rec.scopes[s.scope]
			if f == nil {
				if len(rec.scopes) >= r.o.MaxScopes {
					rec.dropped++
					continue
				}
				f = &analysis.Figures{}
				rec.scopes[s.scope] = f
			}
			*f = f.Add(s.figures)
		}
	}
	return nil
}

// Report returns what the Receiver holds of a proxy of fleet.
func (r *Receiver) Report(fleet, node string) (Report, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reportLocked(Key{Fleet: fleet, Node: node})
}

func (r *Receiver) reportLocked(key Key) (Report, bool) {
	rec := r.proxies[key]
	if rec == nil {
		return Report{Key: key}, false
	}
	out := Report{Key: key, Scopes: make(map[string]analysis.Figures, len(rec.scopes)), Reports: rec.reports,
		First: rec.first, Last: rec.last, Connected: rec.stream != 0, Dropped: rec.dropped}
	for s, f := range rec.scopes {
		out.Scopes[s] = *f
	}
	return out, true
}

// Forget drops what the Receiver holds of a proxy: one that left its
// fleet. A stream it still has ends at its next message.
func (r *Receiver) Forget(fleet, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(Key{Fleet: fleet, Node: node}, forgottenLeft)
}

// Windows returns the windows of the proxies of the rolling fleets, by
// fleet and node id, from the version each runs (Marks.Windows): a proxy
// whose stats the Receiver does not hold gets none. The marks of every
// other fleet and proxy are dropped. The server calls it as it reports.
func (r *Receiver) Windows(versions map[string]map[string]string) map[string]map[string]*publish.Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.marks.Windows(versions, r.reportLocked, r.o.Now())
}

// WindowsChanged is signalled when a proxy's flush is due to change its
// rolling fleet's windows: at most once per WindowInterval a fleet, and
// never for a fleet that does not roll out.
func (r *Receiver) WindowsChanged() <-chan struct{} { return r.windows }

// Proxies returns how many proxies the Receiver holds figures of.
func (r *Receiver) Proxies() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.proxies)
}

// Window returns a proxy's figures between two of its Reports, start taken
// when a step began and end now, in the scopes named (all of them when
// none is): what analysis.Judge takes. The proxy reported in the window
// when a message came after start. A proxy without a start Report (not
// heard of yet), or whose record was made again since (forgotten or
// evicted in between), is measured from nothing.
func Window(start, end Report, scopes ...string) analysis.Proxy {
	if !end.First.Equal(start.First) {
		start = Report{}
	}
	p := analysis.Proxy{Node: end.Node, Reported: end.Reports > start.Reports, Scopes: map[string]analysis.Figures{}}
	if len(scopes) == 0 {
		for s := range end.Scopes {
			scopes = append(scopes, s)
		}
	}
	for _, s := range scopes {
		if f, ok := end.Scopes[s]; ok {
			p.Scopes[s] = f.Sub(start.Scopes[s])
		}
	}
	return p
}
