// Package cache is the xDS server's cache: what each fleet serves, each
// resource encoded once (encoded.go), and, by the rules of Envoy's xDS
// protocol, what each stream is sent (answer.go) and when (Cache). It is
// what go-control-plane's stream server asks, on each request, for the
// response of one type to one stream; the server (internal/xds/server), in
// front of it, checks the streams and records what the proxies answer.
// It serves gRPC to no one, registers no metric, and reads and writes
// nothing but memory.
package cache

import (
	"context"
	"errors"
	"iter"
	"maps"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Cache is the server's cache of what it serves, as go-control-plane's
// stream server sees it (cachev3.ConfigWatcher): the stream server speaks
// the protocol, and asks the cache, on each request, for a watch of one
// type on behalf of one stream. The cache answers the watch at once, or
// later; a watch is answered once, and the stream's next request of that
// type makes a new one.
//
//   - Fleets are keyed by node.cluster, and each has its own lock, the
//     only lock the cache takes: a watch or a publication takes its
//     fleet's lock alone (fleets are found without one), and a publication
//     answers that fleet's waiting watches; nothing of another fleet waits
//     for it.
//   - A watch is answered by what answer.go computes. The response goes on
//     the stream's channel, which always has room for it: the stream
//     server gives each stream one channel for its types (ordered ADS for
//     state of the world, delta's own), with room for a response of each
//     type, and a stream has at most one unanswered watch of a type, which
//     only the cache answers. So the cache never waits for a stream under
//     a lock: a slow or silent stream holds nothing.
//   - The cache knows each stream by that channel (streamState), and sends
//     it the types in the order of make-before-break (resource.PushOrder): a type
//     waits until the stream was sent the served version of every type
//     before it that it subscribes to. So a proxy is sent a push's clusters,
//     then endpoints, listeners, routes and secrets, also when it has not
//     answered the previous push of a type yet: the types after it wait
//     for its answer. The types after the endpoints also wait until the
//     stream was sent the endpoints of every EDS cluster it was sent
//     (warm; in general, what each resource it was sent awaits, by
//     resource.Reference.Warming): a proxy asks for a new cluster's
//     endpoints only once it has the cluster, and a route to a cluster
//     still warming fails its requests, so the endpoints' version alone
//     does not tell.
//   - A watch of a fleet that is not published waits, with its stream, and
//     is answered when the fleet is: a proxy may start before its fleet is
//     published (a new fleet, or a replica that has just started). A fleet
//     that is cleared keeps its streams waiting, and they keep what they
//     have.
//   - Only the types the server serves are watched, secrets only by name,
//     and a stream subscribes to a bounded number of names of each type. A
//     watch of a type the server does not serve is never answered, and the
//     cache keeps nothing of it (the server's unserved.go).
//
// A fleet serves one publication to all of its streams, or, while a
// revision rolls out, two: the new one to the proxies that lead the
// rollout's step, the previous one to the others (served, by the stream's
// node id and publish.Rollout.Serves, which every replica computes alike).
type Cache struct {
	// fleets holds each fleet's entry (*fleetEntry) by name; an entry's
	// own lock guards the rest.
	fleets sync.Map
	names  NameLimits
	// refused counts a watch the cache refuses, by reason (Refused...).
	refused func(reason string)
}

// fleetEntry is one fleet's publication and streams. An entry lives while
// its fleet is published or has streams.
type fleetEntry struct {
	mu sync.Mutex
	// current is the fleet's publication of the history's Current (the
	// revision most recently published); nil while it is not published.
	current *Snapshot
	// previous, while a revision rolls out, is the previous publication
	// and the rollout that says which proxies are served it instead of
	// current.
	previous *Previous
	// streams holds the fleet's streams, by their response channel.
	streams map[any]*streamState
	// gone is set when the entry left the cache: who holds it looks again.
	gone bool
}

// Previous is what a fleet serves, while a revision rolls out, to the
// proxies that the rollout's step does not lead: the previous publication.
type Previous struct {
	Snapshot *Snapshot
	// Rollout says, by node id, which proxies are served Snapshot
	// (publish.Rollout.Serves).
	Rollout publish.Rollout
}

// streamState is what the cache knows of one stream.
type streamState struct {
	// node is the proxy's node id, as its requests give it.
	node string
	// handles counts the stream's watches that the stream server has not
	// cancelled, answered or not. It cancels a type's watch when the
	// stream next asks for the type, or ends: a stream that asked for any
	// type has one until it ends, and its state lives while it has one.
	handles int
	types   [numKinds]streamType
}

// streamType is where a stream stands with one type.
type streamType struct {
	// subscribed: the stream asked for the type.
	subscribed bool
	// at is the version of the type the stream was last sent, or has.
	at string
	// sent is what the cache last sent the stream of the type: the
	// response's returned resources (a state-of-the-world response's names
	// at the type's version, or wildcardSent; a delta stream's names at
	// their own versions). nil until the cache answers the stream.
	sent map[string]string
	// open is the stream's unanswered watch of the type, if any.
	open watch
}

// Snapshot is one publication of a fleet: each type's resources, by the
// index of the type in Kinds, encoded. Nothing changes it once it is made.
type Snapshot struct {
	version string
	types   [numKinds]*typeSnapshot
	// warming holds each resource of the publication that a proxy holds
	// warming until it has another resource of the publication that it
	// names (resource.Reference.Warming: an EDS cluster, its endpoints):
	// what a proxy sent the one asks for, and must have before a type
	// pushed after the other's may name the one (streamState.warm).
	warming []warming
}

// warming is a resource that a proxy holds warming until it has the
// resource it awaits: each by its kind (an index in Kinds) and name.
type warming struct {
	kind    int
	name    string
	awaits  int
	awaited string
}

// NewSnapshot encodes a publication of resources (by type URL) as version.
// Each type's version is a hash of its content (resource.Hash): a type
// whose content is unchanged keeps its version, and every replica gives
// the same content the same version.
func NewSnapshot(version string, resources map[string][]types.Resource) (*Snapshot, error) {
	p := &Snapshot{version: version}
	for i, k := range resource.Kinds {
		t, err := newTypeSnapshot(k.TypeURL, resources[k.TypeURL])
		if err != nil {
			return nil, err
		}
		p.types[i] = t
	}
	for i, t := range p.types {
		for _, e := range t.sorted {
			for _, ref := range warmingReferences(i, e) {
				a := kindIndex(ref.TypeURL)
				if _, ok := p.types[a].byName[ref.Name]; ok {
					p.warming = append(p.warming, warming{kind: i, name: e.name, awaits: a, awaited: ref.Name})
				}
			}
		}
	}
	return p, nil
}

// warmingKey is a resource by its kind (an index in Kinds) and content
// (encodedResource.version).
type warmingKey struct {
	kind    int
	version string
}

// warmingOf remembers the warming references of the resources published
// lately, by content: 16,384 of them per generation. Finding a resource's
// references takes most of the time of a publication (a listener's
// connection managers are decoded), and an edit changes few resources.
var warmingOf = resource.NewGenerations[warmingKey, []resource.Reference](1<<14, 1<<14)

// warmingReferences returns the references of e, a resource of kind, that
// warm (resource.Reference.Warming) to a kind served.
func warmingReferences(kind int, e *encodedResource) []resource.Reference {
	key := warmingKey{kind, e.version}
	if refs, ok := warmingOf.Get(key); ok {
		return refs
	}
	var refs []resource.Reference
	for _, ref := range resource.References(e.resource) {
		if ref.Warming && kindIndex(ref.TypeURL) >= 0 {
			refs = append(refs, ref)
		}
	}
	warmingOf.Put(key, refs, 1)
	return refs
}

// Version is the publication's version.
func (p *Snapshot) Version() string { return p.version }

// TypeVersion returns the version of a type's resources, or "" for a type
// not served.
func (p *Snapshot) TypeVersion(typeURL string) string {
	if i := kindIndex(typeURL); i >= 0 {
		return p.types[i].version
	}
	return ""
}

// Resources returns the publication's resources by type URL, as they were
// published.
func (p *Snapshot) Resources() map[string][]types.Resource {
	out := map[string][]types.Resource{}
	for i, k := range resource.Kinds {
		if rs := p.types[i].plain(); len(rs) > 0 {
			out[k.TypeURL] = rs
		}
	}
	return out
}

// pushed holds the place of each kind (by its index in Kinds) in
// resource.PushOrder.
var pushed = func() (out [numKinds]int) {
	for i, kind := range resource.PushOrder {
		out[kind] = i
	}
	return out
}()

// numKinds is the number of types served (Kinds).
const numKinds = len(resource.Kinds)

// kindIndex returns the index of typeURL in Kinds, or -1.
func kindIndex(typeURL string) int {
	for i, k := range resource.Kinds {
		if k.TypeURL == typeURL {
			return i
		}
	}
	return -1
}

// watch is a stream's open watch of one type.
type watch interface {
	// answer sends what the watch gets from t, for a stream last sent the
	// version at of the type, if anything. It reports whether it did, the
	// version the stream has or was sent now and, when it sent, the
	// response's returned resources.
	answer(t *typeSnapshot, at string) (string, map[string]string, bool)
}

type sotwWatch struct {
	req *discoveryv3.DiscoveryRequest
	sub cachev3.Subscription
	ch  chan cachev3.Response
}

func (w *sotwWatch) answer(t *typeSnapshot, at string) (string, map[string]string, bool) {
	if v := w.req.GetVersionInfo(); v == t.version {
		at = v // the stream has it, from this stream or an earlier one
	}
	resp := answerSotw(t, w.req, w.sub)
	if resp == nil {
		return at, nil, false
	}
	select {
	case w.ch <- resp:
		return resp.version, resp.returned, true
	default:
		// Never: the channel has room for this watch's response (see
		// Cache). Were it full, the watch would wait for the next
		// publication rather than hold the lock.
		return at, nil, false
	}
}

type deltaWatch struct {
	req *discoveryv3.DeltaDiscoveryRequest
	sub cachev3.Subscription
	ch  chan cachev3.DeltaResponse
}

func (w *deltaWatch) answer(t *typeSnapshot, at string) (string, map[string]string, bool) {
	if v, ok := w.sub.ReturnedResources()[typeVersionKey]; ok && v == t.version {
		at = v // the stream was sent it
	}
	resp := answerDelta(t, w.req, w.sub)
	if resp == nil {
		return at, nil, false
	}
	select {
	case w.ch <- resp:
		return resp.version, resp.returned, true
	default:
		return at, nil, false // never, as for sotwWatch
	}
}

// New returns an empty cache whose streams subscribe to at most names;
// refused, when set, counts each watch it refuses, by reason.
func New(names NameLimits, refused func(reason string)) *Cache {
	if refused == nil {
		refused = func(string) {}
	}
	return &Cache{names: names, refused: refused}
}

// SetNames sets the names a stream may subscribe to; call it before the
// cache serves.
func (c *Cache) SetNames(names NameLimits) { c.names = names }

// The reasons the cache refuses a watch for.
const (
	// RefusedWildcardSecret: a subscription to every resource of a type
	// served by name only.
	RefusedWildcardSecret = "wildcard_secret"
	// RefusedNames: more resource names than a stream may subscribe to.
	RefusedNames = "names"
)

// wildcardRefused refuses a subscription to every resource of a type
// served by name only (Kind.ByName): a proxy asks for the secrets its
// listeners and clusters name.
func wildcardRefused(k resource.Kind) error {
	return status.Errorf(codes.InvalidArgument, "%s are served by name only, not to a wildcard subscription", k.Field)
}

// admit checks a watch of typeURL, a served type, with sub: secrets by
// name only and, when names is set, no more names than a stream may
// subscribe to.
func (c *Cache) admit(typeURL string, sub cachev3.Subscription, names bool) error {
	if k := resource.KindOf(typeURL); k.ByName && sub.IsWildcard() {
		c.refused(RefusedWildcardSecret)
		return wildcardRefused(k)
	}
	if !names {
		return nil
	}
	err := c.names.Check(typeURL, len(sub.SubscribedResources()), maps.Keys(sub.SubscribedResources()))
	if status.Code(err) == codes.ResourceExhausted {
		c.refused(RefusedNames)
	}
	return err
}

// unservedWatch is the cancel of a watch of a type the server does not serve:
// the cache keeps nothing of it, and never answers it (the server's
// unserved.go).
func unservedWatch() {}

// CreateWatch implements cachev3.ConfigWatcher, for state-of-the-world streams.
func (c *Cache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, ch chan cachev3.Response) (func(), error) {
	if kindIndex(req.GetTypeUrl()) < 0 {
		return unservedWatch, nil
	}
	// The server checked the request's names, which are the subscription's.
	if err := c.admit(req.GetTypeUrl(), sub, false); err != nil {
		return nil, err
	}
	return c.watch(req.GetNode(), ch, kindIndex(req.GetTypeUrl()), &sotwWatch{req: req, sub: sub, ch: ch}), nil
}

// CreateDeltaWatch implements cachev3.ConfigWatcher, for delta streams.
// A delta stream's names only grow by the names its requests subscribe
// to: a request that subscribes to none (an ACK, most of them) leaves the
// stream with the names an earlier watch of the type was admitted with, or
// fewer, and they are not counted again.
func (c *Cache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) (func(), error) {
	if kindIndex(req.GetTypeUrl()) < 0 {
		return unservedWatch, nil
	}
	if err := c.admit(req.GetTypeUrl(), sub, len(req.GetResourceNamesSubscribe()) > 0); err != nil {
		return nil, err
	}
	return c.watch(req.GetNode(), ch, kindIndex(req.GetTypeUrl()), &deltaWatch{req: req, sub: sub, ch: ch}), nil
}

// errNoFetch refuses REST fetches, which the server does not serve.
var errNoFetch = errors.New("xDS over REST is not served")

// Fetch implements cachev3.ConfigFetcher: the server serves no REST.
func (c *Cache) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errNoFetch
}

// entry returns fleet's entry, made if there is none.
func (c *Cache) entry(fleet string) *fleetEntry {
	if v, ok := c.fleets.Load(fleet); ok {
		return v.(*fleetEntry)
	}
	v, _ := c.fleets.LoadOrStore(fleet, &fleetEntry{})
	return v.(*fleetEntry)
}

// locked returns fleet's entry, locked, or nil when there is none.
func (c *Cache) locked(fleet string) *fleetEntry {
	for {
		v, ok := c.fleets.Load(fleet)
		if !ok {
			return nil
		}
		f := v.(*fleetEntry)
		f.mu.Lock()
		if !f.gone {
			return f
		}
		f.mu.Unlock()
	}
}

// lock returns fleet's entry, locked, made if there is none.
func (c *Cache) lock(fleet string) *fleetEntry {
	for {
		f := c.entry(fleet)
		f.mu.Lock()
		if !f.gone {
			return f
		}
		f.mu.Unlock()
	}
}

// watch opens w, the watch of type kind of the stream of node whose
// channel is stream, and answers it if it can. It returns the watch's
// cancel.
func (c *Cache) watch(node *corev3.Node, stream any, kind int, w watch) func() {
	fleet := Fleet(node)
	f := c.lock(fleet)
	defer f.mu.Unlock()
	if f.streams == nil {
		f.streams = map[any]*streamState{}
	}
	st := f.streams[stream]
	if st == nil {
		st = &streamState{}
		f.streams[stream] = st
	}
	if id := node.GetId(); id != "" {
		st.node = id
	}
	st.handles++
	st.types[kind].subscribed, st.types[kind].open = true, w
	f.serve(st)
	var once sync.Once
	return func() { once.Do(func() { c.cancel(fleet, f, stream, st, kind, w) }) }
}

// serve answers what it may of a stream's open watches, type by type in
// resource.PushOrder: a type waits while the stream was not sent the served version
// of a type before it that it subscribes to.
func (f *fleetEntry) serve(st *streamState) {
	p := f.served(st)
	if p == nil {
		return
	}
	for i, kind := range resource.PushOrder {
		ty := &st.types[kind]
		if ty.open == nil || !st.caughtUp(p, i) {
			continue
		}
		var answered bool
		var sent map[string]string
		if ty.at, sent, answered = ty.open.answer(p.types[kind], ty.at); answered {
			ty.open, ty.sent = nil, sent
		}
	}
}

// caughtUp reports whether the stream was sent p's version of each type
// before the i-th of resource.PushOrder that it subscribes to and whether,
// as far as those types go, it is warm.
func (st *streamState) caughtUp(p *Snapshot, i int) bool {
	for _, kind := range resource.PushOrder[:i] {
		if ty := st.types[kind]; ty.subscribed && ty.at != p.types[kind].version {
			return false
		}
	}
	return st.warm(p, i)
}

// warm reports whether the stream was sent each resource of p that a
// resource it was sent awaits (p.warming: the endpoints of every EDS
// cluster), of the types before the i-th of resource.PushOrder: until
// then, a proxy holds a resource warming (a cluster it cannot send
// requests to), and what names it (a route or listener) fails. A stream
// that subscribes to neither type, or that the cache has not sent the
// warming one's type, has nothing to wait for.
func (st *streamState) warm(p *Snapshot, i int) bool {
	for _, w := range p.warming {
		holders, awaited := &st.types[w.kind], &st.types[w.awaits]
		if pushed[w.awaits] >= i || !holders.subscribed || !awaited.subscribed || holders.sent == nil {
			continue
		}
		if v, ok := holders.sent[w.name]; !ok || v == toldAbsent {
			if _, all := holders.sent[wildcardSent]; !all {
				continue // not sent to this stream
			}
		}
		t := p.types[w.awaits]
		if v, all := awaited.sent[wildcardSent]; all && v == t.version {
			continue
		}
		// A state-of-the-world stream was sent the name at the type's
		// version, a delta stream at the resource's own.
		if v := awaited.sent[w.awaited]; v != t.version && v != t.byName[w.awaited].version {
			return false
		}
	}
	return true
}

// served is the publication the stream is served: the previous one while
// a rollout does not lead its proxy, else the fleet's.
func (f *fleetEntry) served(st *streamState) *Snapshot {
	if p := f.previous; p != nil && f.current != nil && p.Rollout.Serves(st.node) == p.Snapshot.version {
		return p.Snapshot
	}
	return f.current
}

// cancel forgets a watch the stream server no longer needs, the stream if
// it has no watch left, and the fleet's entry if nothing is left of it.
func (c *Cache) cancel(fleet string, f *fleetEntry, stream any, st *streamState, kind int, w watch) {
	f.mu.Lock()
	if st.types[kind].open == w {
		st.types[kind].open = nil
	}
	if st.handles--; st.handles == 0 && f.streams[stream] == st {
		delete(f.streams, stream)
	}
	c.dropLocked(fleet, f)
	f.mu.Unlock()
}

// idle reports whether nothing is left of the entry.
func (f *fleetEntry) idle() bool { return len(f.streams) == 0 && f.current == nil && !f.gone }

// dropLocked removes an entry with nothing left in it, under f.mu. Who
// found the entry before and waits for its lock sees it gone, and looks
// again (lock).
func (c *Cache) dropLocked(fleet string, f *fleetEntry) {
	if f.idle() && c.fleets.CompareAndDelete(fleet, f) {
		f.gone = true
	}
}

// Publish makes p what fleet serves, with previous, when set, served to
// the proxies its rollout does not lead, and answers what it may of each
// stream's open watches.
func (c *Cache) Publish(fleet string, p *Snapshot, previous *Previous) {
	f := c.lock(fleet)
	defer f.mu.Unlock()
	f.current, f.previous = p, previous
	for _, st := range f.streams {
		f.serve(st)
	}
}

// Clear stops serving fleet: its streams wait for it again, and keep what
// they have.
func (c *Cache) Clear(fleet string) {
	f := c.locked(fleet)
	if f == nil {
		return
	}
	defer f.mu.Unlock()
	f.current, f.previous = nil, nil
	c.dropLocked(fleet, f)
}

// Published returns what fleet serves, or nil.
func (c *Cache) Published(fleet string) *Snapshot {
	f := c.locked(fleet)
	if f == nil {
		return nil
	}
	defer f.mu.Unlock()
	return f.current
}

// Ping takes every lock a publication may take, one after the other, and
// returns once it had them: it does not return while a publication is stuck.
func (c *Cache) Ping() {
	c.fleets.Range(func(_, v any) bool {
		f := v.(*fleetEntry)
		f.mu.Lock()
		//nolint:staticcheck // taking the lock is the point
		f.mu.Unlock()
		return true
	})
}

// Waiting returns how many watches wait for a fleet that is not published.
func (c *Cache) Waiting(fleet string) int {
	f := c.locked(fleet)
	if f == nil {
		return 0
	}
	defer f.mu.Unlock()
	if f.current != nil {
		return 0
	}
	n := 0
	for _, st := range f.streams {
		for _, ty := range st.types {
			if ty.open != nil {
				n++
			}
		}
	}
	return n
}

// Sent returns, by node id, the version of typeURL the cache last sent
// each stream of fleet, or that it has. A publication answers every stream
// it can before it returns, so this is what each proxy was sent by then.
func (c *Cache) Sent(fleet, typeURL string) map[string]string {
	kind := kindIndex(typeURL)
	f := c.lock(fleet)
	defer f.mu.Unlock()
	out := map[string]string{}
	for _, st := range f.streams {
		if kind >= 0 {
			out[st.node] = st.types[kind].at
		}
	}
	return out
}

// Occupy takes fleet's lock until release is called, as a publication
// stuck under it would: for tests of what watches the cache's health.
func (c *Cache) Occupy(fleet string) (release func()) {
	f := c.lock(fleet)
	return f.mu.Unlock
}

// Fleet is the fleet a proxy's node claims: its node.cluster, which the
// Envoy controller sets with --service-cluster (a fleet.ID's String). Over
// mutual TLS, the server holds the stream to its certificate's fleet.
func Fleet(node *corev3.Node) string { return node.GetCluster() }

// NameLimits bound the names one stream subscribes to, per type: at most
// Count of them, of at most Bytes in all.
type NameLimits struct{ Count, Bytes int }

// errEmptyName refuses a subscription to a name that no resource can have.
var errEmptyName = status.Error(codes.InvalidArgument, "a resource name may not be empty")

// Check refuses n names (given by names) of typeURL beyond the limits
// (ResourceExhausted), or an empty one (InvalidArgument).
func (l NameLimits) Check(typeURL string, n int, names iter.Seq[string]) error {
	if n > l.Count {
		return status.Errorf(codes.ResourceExhausted, "the stream subscribes to %d %s, more than the %d one stream may", n, namesOf(typeURL), l.Count)
	}
	size := 0
	for name := range names {
		if name == "" {
			return errEmptyName
		}
		if size += len(name); size > l.Bytes {
			return status.Errorf(codes.ResourceExhausted, "the stream subscribes to %s of more than %d bytes in all, more than one stream may", namesOf(typeURL), l.Bytes)
		}
	}
	return nil
}

// namesOf says whose names a stream subscribes to, e.g. "secrets names".
func namesOf(typeURL string) string {
	if f := resource.KindOf(typeURL).Field; f != "" {
		return f + " names"
	}
	return "names of a type not served"
}
