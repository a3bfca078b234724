package server

import (
	"context"
	"sort"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Tracker holds the record of every stream (stream): who is on it, what
// was sent to it, and what it accepted (ACK) or rejected (NACK), for state of
// the world and delta streams alike, and the record of every fleet
// (fleetRecord): its publication, and its streams with their counts. It
// implements go-control-plane's server callbacks; the server's guard is in
// front of it. Changed is signalled, outside any lock, whenever a fleet's
// proxies change state.
//
// Each fleet's record has a lock of its own, which guards it and its
// streams' records: a request takes its fleet's lock once, and nothing of
// another fleet waits for it. Records are found without a lock. A stream's
// record is written by the stream's callbacks alone, which go-control-plane
// calls one at a time, and, once the stream joined its fleet (its first
// request of a type served), under the fleet's lock. A stream may claim any
// fleet. Only fleets that are
// published (publish, until Forget) are counted, reported, notified and
// have metric series: a stream of another fleet is only remembered until it
// closes, and counts once its fleet is published.
//
// A request or a response costs the same whatever the number of proxies:
// each proxy's standing with its fleet's published version is kept, and
// each fleet's counts follow it. Only a publication judges every proxy of
// its fleet again.
type Tracker struct {
	// streams holds each open stream's record (*stream), by id.
	streams sync.Map
	// fleets holds each fleet's record (*fleetRecord), by name, while the
	// fleet is published or has streams.
	fleets sync.Map
	// changed holds a signal while a change is not yet taken (Changed).
	changed chan struct{}
	now     func() time.Time
}

// standing is where a proxy stands with a version.
type standing int

const (
	pending  standing = iota // neither accepted nor rejected every type yet
	accepted                 // accepted every type it asked for
	rejected                 // rejected some type
)

// rejection is what a proxy rejected of a version: a type, and the
// error_detail it gave.
type rejection struct{ typeURL, detail string }

// NewTracker returns a Tracker that follows no stream yet.
func NewTracker() *Tracker {
	return &Tracker{changed: make(chan struct{}, 1), now: time.Now}
}

// Changed is signalled when a fleet's proxies connect, disconnect, ACK or
// NACK, or the fleet is published or forgotten. Changes coalesce: one
// signal stands for every change since the last one was taken, so that its
// one reader (the replica's Reporter) never falls behind.
func (t *Tracker) Changed() <-chan struct{} { return t.changed }

// signal marks a change; it never blocks.
func (t *Tracker) signal() {
	select {
	case t.changed <- struct{}{}:
	default: // a signal is pending: its reader sees this change too
	}
}

var _ serverv3.Callbacks = (*Tracker)(nil)

// ProxyCounts describes a fleet's proxies with respect to one version.
type ProxyCounts struct {
	Connected, Acked, Nacked int
	// LastNACK is the error_detail of a rejection of that version;
	// LastNACKType the type rejected, and LastNACKNode the proxy's node id.
	LastNACK, LastNACKType, LastNACKNode string
}

// Counts returns how the fleet's connected proxies stand with version: a
// proxy acked it when every type it asked for was accepted at that version.
func (t *Tracker) Counts(fleet, version string) ProxyCounts {
	f := t.lockedFleet(fleet)
	if f == nil {
		return ProxyCounts{}
	}
	defer f.mu.Unlock()
	return f.counts(version)
}

// labels returns, for a fleet's version, each type's version in it.
func (t *Tracker) labels(fleet, version string) func(typ string) string {
	f := t.lockedFleet(fleet)
	if f == nil {
		return (*fleetRecord)(nil).labels(version)
	}
	defer f.mu.Unlock()
	return f.labels(version)
}

// judge returns where a proxy stands with the version whose types label
// gives: rejected if it rejected some type at that version (with what it
// rejected), accepted if it accepted every type it asked for.
// Of several types rejected, the rejection of the least type URL is the
// one given, so that a proxy's rejection is the same whenever it is judged.
func judge(s *stream, label func(string) string) (standing, rejection) {
	st := pending
	if s.asks() {
		st = accepted
	}
	var r rejection
	for i := range s.types {
		ty := &s.types[i]
		if !ty.requested {
			continue
		}
		typ := resource.Kinds[i].TypeURL
		if ty.nacked && ty.nack.version == label(typ) {
			if st != rejected || typ < r.typeURL {
				st, r = rejected, rejection{typeURL: typ, detail: ty.nack.detail}
			}
			continue
		}
		if st != rejected && ty.acked != label(typ) {
			st = pending
		}
	}
	return st, r
}

// asks reports whether the stream asks for a type served.
func (s *stream) asks() bool {
	for i := range s.types {
		if s.types[i].requested {
			return true
		}
	}
	return false
}

// Answers returns what each connected proxy of fleet answered, by node id:
// the published version or the previous one, whichever it accepted for every
// type it asked for, and the published version if it rejected it. The
// leader decides a rollout's steps from them (publish.StepRollout).
func (t *Tracker) Answers(fleet string) map[string]publish.ProxyAnswer {
	f := t.lockedFleet(fleet)
	if f == nil {
		return nil
	}
	defer f.mu.Unlock()
	return f.answers()
}

// open records a stream that opens, of the fleet its client certificate
// names ("" in plaintext).
func (t *Tracker) open(id int64, certFleet string) {
	now := t.now()
	t.streams.Store(id, &stream{id: id, certFleet: certFleet, since: now, lastSeen: now})
}

// streamOf returns stream id's record, or nil.
func (t *Tracker) streamOf(id int64) *stream {
	v, _ := t.streams.Load(id)
	s, _ := v.(*stream)
	return s
}

func (t *Tracker) closed(id int64) {
	v, ok := t.streams.LoadAndDelete(id)
	if !ok {
		return
	}
	f := v.(*stream).record
	if f == nil {
		return
	}
	f.mu.Lock()
	f.leave(v.(*stream))
	delete(f.streams, id)
	known := f.published
	if known {
		t.changedLocked(f)
	}
	t.dropLocked(f)
	f.mu.Unlock()
	if known {
		t.signal()
	}
}

// admission is what the Tracker made of a request it admitted.
type admission struct {
	// unserved is set when the type is not served (unserved.go), and first
	// when it is the first such type the stream asked for.
	unserved, first bool
	// answers is set when the request answers the stream's last response
	// of the type, whose version is answered.
	answers  bool
	answered string
	// node and fleet are the stream's.
	node, fleet string
}

// request admits and records a request of a stream, in one step under its
// fleet's lock: its node, which must be who the stream is (identity.go); a type
// not served, which it only counts (unserved.go); or a type served: that
// the proxy asks for it, and an ACK or NACK of the response named by nonce
// (version is "" for delta, whose answers carry none).
func (t *Tracker) request(id int64, node *corev3.Node, typeURL, nonce, version string, errorDetail string, isNack bool, names int) (admission, error) {
	s := t.streamOf(id)
	if s == nil {
		return admission{}, errUnknownStream
	}
	// Who is on the stream, and the types not served it asked for, only
	// the stream's callbacks read and write.
	if err := s.admit(node); err != nil {
		return admission{}, err
	}
	a := admission{node: s.node, fleet: s.fleet}
	kind := kindIndex(typeURL)
	if kind < 0 {
		var err error
		a.unserved = true
		a.first, err = s.askUnserved(typeURL)
		return a, err
	}
	f := s.record
	joined := f == nil
	if joined {
		f = t.lockFleet(s.fleet)
		s.record = f
		f.streams[id] = s
	} else {
		f.mu.Lock() // a record with streams stays
	}
	s.lastSeen = t.now()
	ty := &s.types[kind]
	// A proxy that asked for a type's resources by name and now asks for
	// none (Envoy, when its last EDS cluster is removed) unsubscribed: its
	// standing does not hang on that type. A first request without names
	// asks for every resource, as go-control-plane answers it.
	switch {
	case names > 0:
		ty.requested, ty.named = true, true
	case ty.named && !wildcard(typeURL):
		ty.requested = false
	default:
		ty.requested = true
	}
	known := f.published
	changed := false
	if last := ty.sent; nonce != "" && nonce == last.nonce {
		a.answers, a.answered = true, last.version
		if version == "" {
			version = last.version // delta: the version is the one sent with that nonce
		}
		if isNack {
			ty.nack, ty.nacked = nack{version: last.version, detail: errorDetail}, true
			if known {
				metricNacks.WithLabelValues(s.fleet).Inc()
			}
		} else {
			ty.acked, ty.nack, ty.nacked = version, nack{}, false
			if known {
				metricAcks.WithLabelValues(s.fleet).Inc()
			}
		}
		changed = true
	}
	was := s.standing
	if known {
		f.rejudge(s)
	}
	changed = changed || joined || s.standing != was
	if changed {
		t.changedLocked(f)
	}
	f.mu.Unlock()
	if changed && known {
		t.signal()
	}
	return a, nil
}

func (t *Tracker) response(id int64, typeURL, nonce, version string) {
	kind := kindIndex(typeURL)
	if kind < 0 {
		return
	}
	s := t.streamOf(id)
	if s == nil {
		return
	}
	// Before its first request of a type served, nothing but the stream's
	// callbacks reads its record.
	if f := s.record; f != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		t.sentLocked(f, typeURL, version)
	}
	s.types[kind].sent = sent{nonce: nonce, version: version}
}

// OnStreamOpen implements sotw.Callbacks.
func (t *Tracker) OnStreamOpen(_ context.Context, id int64, _ string) error {
	t.open(id, "")
	return nil
}

// OnStreamClosed implements sotw.Callbacks.
func (t *Tracker) OnStreamClosed(id int64, _ *corev3.Node) { t.closed(id) }

// OnStreamRequest implements sotw.Callbacks.
func (t *Tracker) OnStreamRequest(id int64, r *discoveryv3.DiscoveryRequest) error {
	_, err := t.sotwRequest(id, r)
	return err
}

// sotwRequest admits and records a state-of-the-world request.
func (t *Tracker) sotwRequest(id int64, r *discoveryv3.DiscoveryRequest) (admission, error) {
	return t.request(id, r.GetNode(), r.GetTypeUrl(), r.GetResponseNonce(), r.GetVersionInfo(),
		r.GetErrorDetail().GetMessage(), r.GetErrorDetail() != nil, len(r.GetResourceNames()))
}

// deltaRequest admits and records a delta request.
func (t *Tracker) deltaRequest(id int64, r *discoveryv3.DeltaDiscoveryRequest) (admission, error) {
	return t.request(id, r.GetNode(), r.GetTypeUrl(), r.GetResponseNonce(), "",
		r.GetErrorDetail().GetMessage(), r.GetErrorDetail() != nil, 0)
}

// wildcard reports whether a state-of-the-world request of typeURL without
// resource names asks for every resource, even after one that named some
// (resource.Kind.Wildcard: listeners and clusters).
func wildcard(typeURL string) bool { return resource.KindOf(typeURL).Wildcard }

// OnStreamResponse implements sotw.Callbacks.
func (t *Tracker) OnStreamResponse(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
	t.response(id, r.GetTypeUrl(), r.GetNonce(), r.GetVersionInfo())
}

// OnDeltaStreamOpen implements delta.Callbacks.
func (t *Tracker) OnDeltaStreamOpen(_ context.Context, id int64, _ string) error {
	t.open(id, "")
	return nil
}

// OnDeltaStreamClosed implements delta.Callbacks.
func (t *Tracker) OnDeltaStreamClosed(id int64, _ *corev3.Node) { t.closed(id) }

// OnStreamDeltaRequest implements delta.Callbacks.
func (t *Tracker) OnStreamDeltaRequest(id int64, r *discoveryv3.DeltaDiscoveryRequest) error {
	_, err := t.deltaRequest(id, r)
	return err
}

// OnStreamDeltaResponse implements delta.Callbacks.
func (t *Tracker) OnStreamDeltaResponse(id int64, _ *discoveryv3.DeltaDiscoveryRequest, r *discoveryv3.DeltaDiscoveryResponse) {
	t.response(id, r.GetTypeUrl(), r.GetNonce(), r.GetSystemVersionInfo())
}

// OnFetchRequest implements rest.Callbacks; REST fetches are not tracked.
func (t *Tracker) OnFetchRequest(context.Context, *discoveryv3.DiscoveryRequest) error { return nil }

// OnFetchResponse implements rest.Callbacks.
func (t *Tracker) OnFetchResponse(*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse) {}

// Fleets returns the published fleets that have a connected proxy.
func (t *Tracker) Fleets() []string {
	var out []string
	t.eachFleet(func(f *fleetRecord) {
		if f.published && len(f.streams) > 0 {
			out = append(out, f.name)
		}
	})
	sort.Strings(out)
	return out
}

// ProxyState is what the tracker knows of one proxy's stream.
type ProxyState struct {
	// Node is the proxy's node id, and Fleet its fleet (namespace/name).
	Node, Fleet string
	// Since is when the stream opened, LastSeen when its last request came.
	Since, LastSeen time.Time
	// Types holds, by type URL, each type the proxy asked for.
	Types map[string]TypeState
}

// TypeState is where one proxy stands with one type.
type TypeState struct {
	// Sent is the version of the last response of the type, and Acked the
	// version the proxy last accepted.
	Sent, Acked string
	// NACK, when set, is the proxy's answer to the last response it
	// answered: it rejected that version (NACK.Version), with
	// NACK.Detail (at most MaxNACKDetail bytes).
	NACK *NACK
}

// NACK is a rejection.
type NACK struct{ Version, Detail string }

// Proxies returns the state of every proxy of a published fleet, by fleet
// and node id. It copies under each fleet's lock and does nothing else
// there.
func (t *Tracker) Proxies() []ProxyState {
	var out []ProxyState
	t.eachFleet(func(f *fleetRecord) {
		if f.published {
			out = f.proxies(out)
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Fleet != out[j].Fleet {
			return out[i].Fleet < out[j].Fleet
		}
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Since.Before(out[j].Since)
	})
	return out
}

// proxies appends the state of each of the fleet's streams to out.
func (f *fleetRecord) proxies(out []ProxyState) []ProxyState {
	for _, s := range f.streams {
		p := ProxyState{Node: s.node, Fleet: s.fleet, Since: s.since, LastSeen: s.lastSeen, Types: map[string]TypeState{}}
		for i := range s.types {
			ty := &s.types[i]
			if !ty.requested {
				continue
			}
			ts := TypeState{Sent: ty.sent.version, Acked: ty.acked}
			if ty.nacked {
				ts.NACK = &NACK{Version: ty.nack.version, Detail: ty.nack.detail}
			}
			p.Types[resource.Kinds[i].TypeURL] = ts
		}
		out = append(out, p)
	}
	return out
}
