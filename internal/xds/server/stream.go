package server

import (
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// stream is what the server knows of one ADS stream, in one record: made
// when the stream opens, under one id (a delta stream's is negative, see
// deltaStream), and dropped when it closes. The Tracker holds the records.
// go-control-plane calls a stream's callbacks one at a time, so that only
// they write its record; once the stream joined its fleet's record, they
// do it under the fleet's lock, which readers take. A record holds who is on the stream (identity.go), the
// types it asked for that are not served (unserved.go) and, for each type
// served, what the stream was last sent and how its proxy answered, from
// which its standing with its fleet's version follows (tracker.go).
//
// What the cache keeps of a stream for its watches (what it sent, at which
// version) lives with its fleet's entry in the cache, under the fleet's
// lock: go-control-plane's cache knows a stream only by its response
// channel, not by its id.
//
// A record costs no goroutine, and no map but for a stream that asks for a
// type the server does not serve: the types served are an array.
type stream struct {
	id int64
	// certFleet is the fleet the stream's client certificate names, ""
	// in plaintext.
	certFleet string
	// fleet and node are node.cluster and node.id of the stream's first
	// request, seen once it came.
	fleet, node string
	seen        bool
	// record is set once the stream asked for a type served: the stream
	// is then one of the streams of that fleet's record, until it closes.
	record *fleetRecord
	// unserved are the types not served that the stream asked for, at most
	// maxUnservedTypes.
	unserved []string
	// standing is the stream's, with its fleet's published version, and
	// rejection the type and detail of the rejection when it is rejected.
	standing  standing
	rejection rejection
	// types holds where the stream stands with each type served, by its
	// index in resource.Kinds.
	types [numKinds]streamKind
	// since is when the stream opened, lastSeen when its last request of a
	// type served came.
	since, lastSeen time.Time
}

// streamKind is where a stream stands with one type served.
type streamKind struct {
	// sent is the type's last response: an answer to an older one is
	// stale, and changes nothing.
	sent sent
	// acked is the version the proxy last accepted, and nack, when nacked,
	// its last rejection, which an ACK clears.
	acked  string
	nack   nack
	nacked bool
	// requested: the proxy asks for the type; named: it asked for
	// resources of it by name.
	requested, named bool
}

// numKinds is the number of types served (resource.Kinds).
const numKinds = len(resource.Kinds)

// kindIndex returns the index of typeURL in resource.Kinds, or -1.
func kindIndex(typeURL string) int {
	for i, k := range resource.Kinds {
		if k.TypeURL == typeURL {
			return i
		}
	}
	return -1
}

// sent is a response: its nonce and version.
type sent struct{ nonce, version string }

type nack struct{ version, detail string }
