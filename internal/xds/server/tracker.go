package server

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Tracker holds the record of every stream (stream): who is on it, what
// was sent to it, and what it accepted (ACK) or rejected (NACK), for state of
// the world and delta streams alike, and it keeps each fleet's counts over
// them. It implements go-control-plane's server callbacks; the server's
// guard is in front of it. Changed is signalled, outside the lock, whenever
// a fleet's proxies change state. A request takes its lock once.
//
// A stream may claim any fleet. Only fleets that are published (Published,
// until Forget) are counted, reported, notified and have metric series: a
// stream of another fleet is only remembered, as one entry until it closes,
// and counts once its fleet is published.
//
// A request or a response costs the same whatever the number of proxies:
// each proxy's standing with its fleet's published version is kept, and
// each fleet's counts follow it. Only a publication judges every proxy of
// its fleet again.
type Tracker struct {
	mu        sync.Mutex
	streams   map[int64]*stream
	fleets    map[string]*fleetProxies // by fleet: its counted streams
	published map[string]publication   // by fleet
	// typeVersions holds, by fleet and fleet version, each type's version in
	// that publication (see Server.SetFleet); versions holds each fleet's
	// versions there, from the least recently published.
	typeVersions map[string]map[string]map[string]string
	versions     map[string][]string
	// staged holds, by fleet, the previous version served while a revision
	// rolls out (Staged).
	staged map[string]string
	// changed holds a signal while a change is not yet taken (Changed).
	changed chan struct{}
	now     func() time.Time
}

// maxVersions bounds the publications remembered per fleet. Beyond it, the
// least recently published version that no proxy of the fleet accepted or
// rejected is forgotten first (forgetVersionLocked); the published one never.
const maxVersions = 64

type publication struct {
	version string
	at      time.Time
	allAck  bool // the publish-to-ACK time has been observed
}

// fleetProxies is a fleet's connected proxies and how many of them stand
// where with its published version.
type fleetProxies struct {
	streams        map[int64]*stream
	acked, nacked  int
	lastNACKStream int64 // a stream that rejected the published version, if nacked > 0
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
	return &Tracker{streams: map[int64]*stream{}, fleets: map[string]*fleetProxies{}, published: map[string]publication{},
		typeVersions: map[string]map[string]map[string]string{}, versions: map[string][]string{}, staged: map[string]string{},
		changed: make(chan struct{}, 1), now: time.Now}
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
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.countsLocked(fleet, version)
}

func (t *Tracker) countsLocked(fleet, version string) ProxyCounts {
	f := t.fleets[fleet]
	if f == nil {
		return ProxyCounts{}
	}
	c := ProxyCounts{Connected: len(f.streams)}
	if p, ok := t.published[fleet]; ok && p.version == version {
		c.Acked, c.Nacked = f.acked, f.nacked
		if f.nacked > 0 {
			s := f.streams[f.lastNACKStream]
			c.LastNACK, c.LastNACKType, c.LastNACKNode = s.rejection.detail, s.rejection.typeURL, s.node
		}
		return c
	}
	// Another version than the published one: judge every proxy against it.
	label := t.labels(fleet, version)
	for _, s := range f.streams {
		switch st, r := judge(s, label); st {
		case rejected:
			c.Nacked++
			c.LastNACK, c.LastNACKType, c.LastNACKNode = r.detail, r.typeURL, s.node
		case accepted:
			c.Acked++
		}
	}
	return c
}

// labels returns, for a fleet's version, each type's version in it.
func (t *Tracker) labels(fleet, version string) func(typ string) string {
	tv := t.typeVersions[fleet][version]
	return func(typ string) string {
		if v, ok := tv[typ]; ok {
			return v
		}
		return version
	}
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

// rejudgeLocked judges a stream of fleet f again against the published
// version, and moves it between the fleet's counts.
func (t *Tracker) rejudgeLocked(f *fleetProxies, s *stream, label func(string) string) {
	t.leaveLocked(f, s)
	s.standing, s.rejection = judge(s, label)
	f.count(s)
}

// count adds a judged stream to the fleet's counts.
func (f *fleetProxies) count(s *stream) {
	switch s.standing {
	case accepted:
		f.acked++
	case rejected:
		f.nacked++
		f.lastNACKStream = s.id
	}
}

// leaveLocked takes a stream out of its fleet's counts.
func (t *Tracker) leaveLocked(f *fleetProxies, s *stream) {
	switch s.standing {
	case accepted:
		f.acked--
	case rejected:
		f.nacked--
		if f.lastNACKStream == s.id && f.nacked > 0 {
			// Another rejection stands for the fleet; finding one is
			// the only walk over the fleet's proxies a request can cost.
			for id, o := range f.streams {
				if o.standing == rejected && id != s.id {
					f.lastNACKStream = id
					break
				}
			}
		}
	}
	s.standing, s.rejection = pending, rejection{}
}

// rejudgeFleetLocked judges every proxy of fleet again, after a publication.
func (t *Tracker) rejudgeFleetLocked(fleet string) {
	f := t.fleets[fleet]
	p, ok := t.published[fleet]
	if f == nil || !ok {
		return
	}
	label := t.labels(fleet, p.version)
	f.acked, f.nacked = 0, 0
	for _, s := range f.streams {
		s.standing, s.rejection = judge(s, label)
		f.count(s)
	}
}

// Published records that fleet's configuration is now version, with each
// type at the version typeVersions gives it, so that ACKs can be judged and
// the time until every proxy accepts it measured. The fleet's proxies are
// judged anew, so Changed is signalled.
func (t *Tracker) Published(fleet, version string, typeVersions map[string]string) {
	t.recordPublication(fleet, version, typeVersions)
	t.signal()
}

func (t *Tracker) recordPublication(fleet, version string, typeVersions map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rememberLocked(fleet, version, typeVersions)
	p, known := t.published[fleet]
	if !known || p.version != version {
		t.published[fleet] = publication{version: version, at: t.now()}
		metricPushes.WithLabelValues(fleet).Inc()
	}
	if len(t.versions[fleet]) > maxVersions { // one more than the bound
		t.forgetVersionLocked(fleet)
	}
	// The same version may come with other type versions (endpoints and
	// secrets are live): every proxy is judged again, and those that
	// connected before the fleet was published count from now on.
	t.rejudgeFleetLocked(fleet)
	t.changedLocked(fleet)
}

// rememberLocked records each type's version in fleet's version.
func (t *Tracker) rememberLocked(fleet, version string, typeVersions map[string]string) {
	if t.typeVersions[fleet] == nil {
		t.typeVersions[fleet] = map[string]map[string]string{}
	}
	t.typeVersions[fleet][version] = typeVersions
	t.versions[fleet] = append(slices.DeleteFunc(t.versions[fleet], func(v string) bool { return v == version }), version)
}

// Staged records that, while a revision of fleet rolls out, the proxies its
// step does not lead are served version, with each type at the version
// typeVersions gives it, so that their answers are judged; version "" says
// that no rollout is under way. Published follows it, and signals.
func (t *Tracker) Staged(fleet, version string, typeVersions map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if version == "" {
		delete(t.staged, fleet)
		return
	}
	t.staged[fleet] = version
	t.rememberLocked(fleet, version, typeVersions)
}

// Rolling reports whether a revision of fleet rolls out (Staged).
func (t *Tracker) Rolling(fleet string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.staged[fleet] != ""
}

// Answers returns what each connected proxy of fleet answered, by node id:
// the published version or the staged one, whichever it accepted for every
// type it asked for, and the published version if it rejected it. The
// leader decides a rollout's steps from them (publish.StepRollout).
func (t *Tracker) Answers(fleet string) map[string]publish.ProxyAnswer {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, p := t.fleets[fleet], t.published[fleet]
	if f == nil || p.version == "" {
		return nil
	}
	out := make(map[string]publish.ProxyAnswer, len(f.streams))
	var staged func(string) string
	if v := t.staged[fleet]; v != "" {
		staged = t.labels(fleet, v)
	}
	for _, s := range f.streams {
		var a publish.ProxyAnswer
		switch s.standing {
		case accepted:
			a.Acked = p.version
		case rejected:
			a.Nacked, a.Detail, a.Type = p.version, s.rejection.detail, s.rejection.typeURL
		}
		if a.Acked == "" && staged != nil {
			if st, _ := judge(s, staged); st == accepted {
				a.Acked = t.staged[fleet]
			}
		}
		// A proxy with two streams (the old one closing as it reconnects)
		// answers as the one that answered.
		if prev, ok := out[s.node]; !ok || prev == (publish.ProxyAnswer{}) {
			out[s.node] = a
		}
	}
	return out
}

// forgetVersionLocked forgets one of fleet's versions, other than the
// published one: the least recently published that no proxy of the fleet
// stands with (accepted, or rejected), so that counts of it stay true; if
// every one has proxies, the least recently published.
func (t *Tracker) forgetVersionLocked(fleet string) {
	vs := t.versions[fleet]
	published, staged := t.published[fleet].version, t.staged[fleet]
	forget := -1
	for i, v := range vs {
		if v == published || v == staged {
			continue
		}
		if forget < 0 {
			forget = i
		}
		if !t.standsWithLocked(fleet, v) {
			forget = i
			break
		}
	}
	if forget < 0 {
		return
	}
	delete(t.typeVersions[fleet], vs[forget])
	t.versions[fleet] = slices.Delete(vs, forget, forget+1)
}

// standsWithLocked reports whether a proxy of fleet accepted or rejected version.
func (t *Tracker) standsWithLocked(fleet, version string) bool {
	f := t.fleets[fleet]
	if f == nil {
		return false
	}
	label := t.labels(fleet, version)
	for _, s := range f.streams {
		if st, _ := judge(s, label); st != pending {
			return true
		}
	}
	return false
}

// Forget drops what the tracker knows of a fleet's publications, and the
// fleet's metric series: it is no longer published.
func (t *Tracker) Forget(fleet string) {
	t.mu.Lock()
	_, known := t.published[fleet]
	delete(t.published, fleet)
	delete(t.typeVersions, fleet)
	delete(t.versions, fleet)
	delete(t.staged, fleet)
	for _, m := range []interface{ DeleteLabelValues(...string) bool }{metricConnected, metricPushes, metricAcks, metricNacks} {
		m.DeleteLabelValues(fleet)
	}
	t.mu.Unlock()
	if known {
		t.signal()
	}
}

// knownLocked reports whether fleet is published.
func (t *Tracker) knownLocked(fleet string) bool {
	_, ok := t.published[fleet]
	return ok
}

// changedLocked updates the fleet's metrics after its proxies changed, and
// observes the publish-to-ACK time once every connected proxy accepted the
// published version.
func (t *Tracker) changedLocked(fleet string) {
	if !t.knownLocked(fleet) {
		return
	}
	f := t.fleets[fleet]
	connected := 0
	if f != nil {
		connected = len(f.streams)
	}
	metricConnected.WithLabelValues(fleet).Set(float64(connected))
	p, ok := t.published[fleet]
	if !ok || p.allAck {
		return
	}
	if connected > 0 && f.acked == connected {
		metricPublishToAck.Observe(t.now().Sub(p.at).Seconds())
		p.allAck = true
		t.published[fleet] = p
	}
}

// open records a stream that opens, of the fleet its client certificate
// names ("" in plaintext).
func (t *Tracker) open(id int64, certFleet string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.streams[id] = &stream{id: id, certFleet: certFleet, since: now, lastSeen: now}
}

func (t *Tracker) closed(id int64) {
	t.mu.Lock()
	s, ok := t.streams[id]
	if !ok {
		t.mu.Unlock()
		return
	}
	delete(t.streams, id)
	if f := t.fleets[s.fleet]; s.counted && f != nil {
		t.leaveLocked(f, s)
		delete(f.streams, id)
		if len(f.streams) == 0 {
			delete(t.fleets, s.fleet)
		}
	}
	fleet := ""
	if t.knownLocked(s.fleet) {
		fleet = s.fleet
		t.changedLocked(fleet)
	}
	t.mu.Unlock()
	if fleet != "" {
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

// request admits and records a request of a stream, in one step under the
// lock: its node, which must be who the stream is (identity.go); a type
// not served, which it only counts (unserved.go); or a type served: that
// the proxy asks for it, and an ACK or NACK of the response named by nonce
// (version is "" for delta, whose answers carry none).
func (t *Tracker) request(id int64, node *corev3.Node, typeURL, nonce, version string, errorDetail string, isNack bool, names int) (admission, error) {
	t.mu.Lock()
	s, ok := t.streams[id]
	if !ok {
		t.mu.Unlock()
		return admission{}, errUnknownStream
	}
	if err := s.admit(node); err != nil {
		t.mu.Unlock()
		return admission{}, err
	}
	a := admission{node: s.node, fleet: s.fleet}
	kind := kindIndex(typeURL)
	if kind < 0 {
		var err error
		a.unserved = true
		a.first, err = s.askUnserved(typeURL)
		t.mu.Unlock()
		return a, err
	}
	joined := !s.counted
	if joined {
		s.counted = true
		f := t.fleets[s.fleet]
		if f == nil {
			f = &fleetProxies{streams: map[int64]*stream{}}
			t.fleets[s.fleet] = f
		}
		f.streams[id] = s
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
	known := t.knownLocked(s.fleet)
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
	if p, ok := t.published[s.fleet]; ok {
		t.rejudgeLocked(t.fleets[s.fleet], s, t.labels(s.fleet, p.version))
	}
	changed = changed || joined || s.standing != was
	if changed {
		t.changedLocked(s.fleet)
	}
	t.mu.Unlock()
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.streams[id]; ok {
		s.types[kind].sent = sent{nonce: nonce, version: version}
	}
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
// resource names asks for every resource (listeners and clusters), even
// after one that named some.
func wildcard(typeURL string) bool {
	return typeURL == resourcev3.ListenerType || typeURL == resourcev3.ClusterType
}

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
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for fleet := range t.fleets {
		if t.knownLocked(fleet) {
			out = append(out, fleet)
		}
	}
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
// and node id. It copies under the lock and does nothing else there.
func (t *Tracker) Proxies() []ProxyState {
	t.mu.Lock()
	out := make([]ProxyState, 0, len(t.streams))
	for _, s := range t.streams {
		if !s.counted || !t.knownLocked(s.fleet) {
			continue
		}
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
	t.mu.Unlock()
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
