package server

import (
	"slices"
	"sync"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// fleetRecord is what the server knows of one fleet, in one record: its
// publication (the version served, each type's version in it and in the
// versions before it, the previous revision while one rolls out) and its
// streams, with how many of them stand where with the version served. Its
// lock guards it and its streams' records, so that a publication, a
// proxy's answer and a report each see a fleet whole. A record lives while
// its fleet is published or has streams.
//
// The cache keeps the fleet's publication encoded, and its streams'
// watches, apart, under the fleet's own lock (internal/xds/cache): the
// server publishes to the record first and then to the cache, under the
// fleet's publication lock (Server.publicationLock).
type fleetRecord struct {
	mu sync.Mutex
	// gone is set when the record left the Tracker: who holds it looks again.
	gone bool
	name string
	// published is set while the fleet is published (until Forget):
	// version is then its version, content a hash of its types' versions,
	// at when the version was published, and allAck is set once every
	// connected proxy accepted it (the publish-to-ACK time was observed).
	published        bool
	version, content string
	at               time.Time
	allAck           bool
	// started is when the publication of version started (SetFleet), and
	// lastSent when its last response so far was handed to a stream, until
	// allAck: the fan-out's time is observed then.
	started, lastSent time.Time
	// previous, while a revision rolls out, is the version of the previous
	// revision, which the proxies the rollout's step does not lead are
	// served; previousKey is its content hash and the rollout's state
	// (publish.Rollout.Key).
	previous, previousKey string
	// typeVersions holds each type's version in each version remembered,
	// and versions those versions, from the least recently published.
	typeVersions map[string]map[string]string
	versions     []string
	// streams are the fleet's counted streams, and acked and nacked how
	// many of them stand where with version.
	streams        map[int64]*stream
	acked, nacked  int
	lastNACKStream int64 // a stream that rejected the published version, if nacked > 0
}

// maxVersions bounds the versions remembered per fleet. Beyond it, the
// least recently published version that no proxy of the fleet accepted or
// rejected is forgotten first (forgetVersion); the published one never.
const maxVersions = 64

// lockFleet returns the record of fleet name, locked, made if there is none.
func (t *Tracker) lockFleet(name string) *fleetRecord {
	for {
		v, ok := t.fleets.Load(name)
		if !ok {
			v, _ = t.fleets.LoadOrStore(name, &fleetRecord{name: name, streams: map[int64]*stream{}})
		}
		f := v.(*fleetRecord)
		f.mu.Lock()
		if !f.gone {
			return f
		}
		f.mu.Unlock()
	}
}

// lockedFleet returns the record of fleet name, locked, or nil when there
// is none.
func (t *Tracker) lockedFleet(name string) *fleetRecord {
	for {
		v, ok := t.fleets.Load(name)
		if !ok {
			return nil
		}
		f := v.(*fleetRecord)
		f.mu.Lock()
		if !f.gone {
			return f
		}
		f.mu.Unlock()
	}
}

// eachFleet calls do with each fleet's record, locked.
func (t *Tracker) eachFleet(do func(f *fleetRecord)) {
	t.fleets.Range(func(_, v any) bool {
		f := v.(*fleetRecord)
		f.mu.Lock()
		if !f.gone {
			do(f)
		}
		f.mu.Unlock()
		return true
	})
}

// dropLocked forgets a record with nothing left in it, under its lock.
func (t *Tracker) dropLocked(f *fleetRecord) {
	if !f.published && len(f.streams) == 0 && t.fleets.CompareAndDelete(f.name, f) {
		f.gone = true
	}
}

// contentOf is a hash of each type's version.
func contentOf(typeVersions map[string]string) string {
	h := resource.NewHash()
	for _, k := range resource.Kinds {
		h.Add(k.TypeURL, typeVersions[k.TypeURL])
	}
	return h.Sum()
}

// publish records fleet name's publication: version, with each type at
// the version typeVersions gives it, so that answers can be judged and the
// time until every proxy accepts it measured; and, while a revision rolls
// out, the previous version (previous, "" when none), with its types, that
// the proxies rollout (publish.Rollout.Key) does not lead are served;
// started is when its publication started. It
// does nothing, and reports false, when that is what the record holds; else
// the fleet's proxies are judged anew, and Changed is signalled.
func (t *Tracker) publish(name, version string, typeVersions map[string]string, previous string, previousTypes map[string]string, rollout string, started time.Time) bool {
	content, previousKey := contentOf(typeVersions), ""
	if previous != "" {
		previousKey = contentOf(previousTypes) + " " + rollout
	}
	f := t.lockFleet(name)
	if f.published && f.version == version && f.content == content && f.previousKey == previousKey {
		f.mu.Unlock()
		return false
	}
	f.previous, f.previousKey = previous, previousKey
	if previous != "" {
		f.remember(previous, previousTypes)
	}
	f.remember(version, typeVersions)
	if !f.published || f.version != version {
		f.version, f.at, f.allAck = version, t.now(), false
		f.started, f.lastSent = started, time.Time{}
		metricPushes.WithLabelValues(name).Inc()
	}
	f.published, f.content = true, content
	if len(f.versions) > maxVersions { // one more than the bound
		f.forgetVersion()
	}
	// The same version may come with other type versions (endpoints and
	// secrets are live): every proxy is judged again, and those that
	// connected before the fleet was published count from now on.
	f.rejudgeAll()
	t.changedLocked(f)
	f.mu.Unlock()
	t.signal()
	return true
}

// Published records that fleet's configuration is now version, with each
// type at the version typeVersions gives it, and no rollout under way (see
// publish).
func (t *Tracker) Published(fleet, version string, typeVersions map[string]string) {
	t.publish(fleet, version, typeVersions, "", nil, "", t.now())
}

// Forget drops what the tracker knows of a fleet's publications, and the
// fleet's metric series: it is no longer published.
func (t *Tracker) Forget(name string) {
	f := t.lockedFleet(name)
	known := f != nil && f.published
	if f != nil {
		f.published, f.version, f.content, f.at, f.allAck = false, "", "", time.Time{}, false
		f.started, f.lastSent = time.Time{}, time.Time{}
		f.previous, f.previousKey, f.typeVersions, f.versions = "", "", nil, nil
		t.dropLocked(f)
	}
	// Under the fleet's lock, if it has a record, so that no change of its
	// proxies makes its series again.
	for _, m := range []interface{ DeleteLabelValues(...string) bool }{metricConnected, metricPushes, metricAcks, metricNacks} {
		m.DeleteLabelValues(name)
	}
	if f != nil {
		f.mu.Unlock()
	}
	if known {
		t.signal()
	}
}

// Version returns the version fleet is published at, or "".
func (t *Tracker) Version(name string) string {
	f := t.lockedFleet(name)
	if f == nil {
		return ""
	}
	defer f.mu.Unlock()
	return f.version
}

// Rolling reports whether a revision of fleet rolls out.
func (t *Tracker) Rolling(name string) bool {
	f := t.lockedFleet(name)
	if f == nil {
		return false
	}
	defer f.mu.Unlock()
	return f.previous != ""
}

// report returns, of one look at fleet name's record, its version, how its
// proxies stand with it, and, while a revision rolls out, what each
// answered (Answers).
func (t *Tracker) report(name string) (string, ProxyCounts, map[string]publish.ProxyAnswer) {
	f := t.lockedFleet(name)
	if f == nil {
		return "", ProxyCounts{}, nil
	}
	defer f.mu.Unlock()
	var answers map[string]publish.ProxyAnswer
	if f.previous != "" {
		answers = f.answers()
	}
	return f.version, f.counts(f.version), answers
}

// remember records each type's version in version.
func (f *fleetRecord) remember(version string, typeVersions map[string]string) {
	if f.typeVersions == nil {
		f.typeVersions = map[string]map[string]string{}
	}
	f.typeVersions[version] = typeVersions
	f.versions = append(slices.DeleteFunc(f.versions, func(v string) bool { return v == version }), version)
}

// forgetVersion forgets one of the fleet's versions, other than the
// published one and the previous one: the least recently published that no
// proxy of the fleet stands with (accepted, or rejected), so that counts of
// it stay true; if every one has proxies, the least recently published.
func (f *fleetRecord) forgetVersion() {
	forget := -1
	for i, v := range f.versions {
		if v == f.version || v == f.previous {
			continue
		}
		if forget < 0 {
			forget = i
		}
		if !f.standsWith(v) {
			forget = i
			break
		}
	}
	if forget < 0 {
		return
	}
	delete(f.typeVersions, f.versions[forget])
	f.versions = slices.Delete(f.versions, forget, forget+1)
}

// standsWith reports whether a proxy of the fleet accepted or rejected version.
func (f *fleetRecord) standsWith(version string) bool {
	label := f.labels(version)
	for _, s := range f.streams {
		if st, _ := judge(s, label); st != pending {
			return true
		}
	}
	return false
}

// labels returns, for one of the fleet's versions, each type's version in
// it (the version itself for a type it does not know).
func (f *fleetRecord) labels(version string) func(typ string) string {
	var tv map[string]string
	if f != nil {
		tv = f.typeVersions[version]
	}
	return func(typ string) string {
		if v, ok := tv[typ]; ok {
			return v
		}
		return version
	}
}

// counts returns how the fleet's connected proxies stand with version.
func (f *fleetRecord) counts(version string) ProxyCounts {
	c := ProxyCounts{Connected: len(f.streams)}
	if f.published && f.version == version {
		c.Acked, c.Nacked = f.acked, f.nacked
		if f.nacked > 0 {
			s := f.streams[f.lastNACKStream]
			c.LastNACK, c.LastNACKType, c.LastNACKNode = s.rejection.detail, s.rejection.typeURL, s.node
		}
		return c
	}
	// Another version than the published one: judge every proxy against it.
	label := f.labels(version)
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

// answers returns what each connected proxy answered, by node id (Answers).
func (f *fleetRecord) answers() map[string]publish.ProxyAnswer {
	if !f.published || len(f.streams) == 0 {
		return nil
	}
	out := make(map[string]publish.ProxyAnswer, len(f.streams))
	var previous func(string) string
	if f.previous != "" {
		previous = f.labels(f.previous)
	}
	for _, s := range f.streams {
		var a publish.ProxyAnswer
		switch s.standing {
		case accepted:
			a.Acked = f.version
		case rejected:
			a.Nacked, a.Detail, a.Type = f.version, s.rejection.detail, s.rejection.typeURL
		}
		if a.Acked == "" && previous != nil {
			if st, _ := judge(s, previous); st == accepted {
				a.Acked = f.previous
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

// rejudge judges a stream of the fleet again against the published
// version, and moves it between the fleet's counts.
func (f *fleetRecord) rejudge(s *stream) {
	f.leave(s)
	s.standing, s.rejection = judge(s, f.labels(f.version))
	f.count(s)
}

// rejudgeAll judges every proxy of the fleet again, after a publication.
func (f *fleetRecord) rejudgeAll() {
	label := f.labels(f.version)
	f.acked, f.nacked = 0, 0
	for _, s := range f.streams {
		s.standing, s.rejection = judge(s, label)
		f.count(s)
	}
}

// count adds a judged stream to the fleet's counts.
func (f *fleetRecord) count(s *stream) {
	switch s.standing {
	case accepted:
		f.acked++
	case rejected:
		f.nacked++
		f.lastNACKStream = s.id
	}
}

// leave takes a stream out of the fleet's counts.
func (f *fleetRecord) leave(s *stream) {
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

// changedLocked updates the fleet's metrics after its proxies changed, and
// observes the publish-to-ACK time once every connected proxy accepted the
// published version, and the fan-out's: from the publication's start to the
// last response of it handed to a stream, if any was (a publication that
// changed no type a proxy asks for sends nothing).
func (t *Tracker) changedLocked(f *fleetRecord) {
	if !f.published {
		return
	}
	connected := len(f.streams)
	metricConnected.WithLabelValues(f.name).Set(float64(connected))
	if !f.allAck && connected > 0 && f.acked == connected {
		metricPublishToAck.Observe(t.now().Sub(f.at).Seconds())
		if !f.started.IsZero() && f.lastSent.After(f.started) {
			metricPushStage.WithLabelValues(string(StageFanout)).Observe(f.lastSent.Sub(f.started).Seconds())
		}
		f.allAck = true
	}
}

// sentLocked notes a response of type typeURL at version handed to one of
// the fleet's streams: one of the published version's, until every
// connected proxy accepted it, is the fan-out's last so far.
func (t *Tracker) sentLocked(f *fleetRecord, typeURL, version string) {
	if f.published && !f.allAck && version == f.typeVersions[f.version][typeURL] {
		f.lastSent = t.now()
	}
}
