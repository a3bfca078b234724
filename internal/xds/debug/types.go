// Package debug is what each replica's debug endpoint for the xDS control
// plane answers, as both ends read it: which proxies are connected to the
// replica and where each stands with each type (proxies), what a fleet is
// served (config), and the fleet's recorded history, from which kubectl
// envoy diff decides what it would be served next (history). Package
// endpoint serves it; kubectl envoy reads it.
//
// Its invariant: everything here is pure, and what the endpoint shows of a
// configuration or a history has its secret material redacted (Dump,
// RedactConfig, Shown). kubectl envoy links it without the ADS runtime.
package debug

import (
	"encoding/json"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// Paths of the endpoint.
const (
	// ProxiesPath lists proxies; query: namespace, and fleet (a name in
	// that namespace).
	ProxiesPath = "/debug/xds/proxies"
	// ConfigPath dumps what a fleet is served; query: fleet
	// (namespace/name), and type (a Kind's field, e.g. listeners).
	ConfigPath = "/debug/xds/config"
	// HistoryPath shows a fleet's recorded history (Shown); query: fleet
	// (namespace/name).
	HistoryPath = "/debug/xds/history"
	// VersionPath tells the replica's version.
	VersionPath = "/version"
)

// DefaultPort is the endpoint's port unless --debug-bind-address says
// otherwise, and the one kubectl envoy forwards to when the operator's pod
// names no port "debug".
const DefaultPort = 8444

// State is where a proxy stands with a type, or with all its types.
type State string

const (
	// Synced: the proxy accepted the type's current version (TypeStatus).
	Synced State = "SYNCED"
	// Stale: it has not accepted the current version yet (it was not
	// sent yet, or the proxy did not answer yet).
	Stale State = "STALE"
	// NACKed: the proxy rejected the last version it answered.
	NACKed State = "NACKED"
)

// ProxyList is a replica's answer at ProxiesPath.
type ProxyList struct {
	Replica string     `json:"replica"`
	Proxies []ProxyRow `json:"proxies"`
}

// ProxyRow is one proxy's stream to one replica.
type ProxyRow struct {
	// Node is the proxy's node id (its pod's name, for the operator's fleets).
	Node string `json:"node"`
	// Fleet is namespace/name of its Envoy.
	Fleet   string `json:"fleet"`
	Replica string `json:"replica"`
	// ConnectedSince is when its stream opened, LastSeen when it last sent a request.
	ConnectedSince time.Time `json:"connectedSince"`
	LastSeen       time.Time `json:"lastSeen"`
	// Types are the types it asked for, in the order of xds.Kinds.
	Types []TypeStatus `json:"types"`
	// State is the worst of its types' states, and NACK the detail of
	// its first NACKed type.
	State State  `json:"state"`
	NACK  string `json:"nack,omitempty"`
}

// TypeStatus is where a proxy stands with one type.
type TypeStatus struct {
	// Type is the kind's field name: listeners, routes, clusters, endpoints or secrets.
	Type string `json:"type"`
	// Current is the type's version in the fleet's current publication on
	// the replica (the history's Current), Sent the version last sent to
	// the proxy, Acked the one it last accepted.
	Current string `json:"current"`
	Sent    string `json:"sent,omitempty"`
	Acked   string `json:"acked,omitempty"`
	State   State  `json:"state"`
	// NACKVersion and NACK are the version the proxy rejected, and why.
	NACKVersion string `json:"nackVersion,omitempty"`
	NACK        string `json:"nack,omitempty"`
}

// ConfigDump is a replica's answer at ConfigPath: the fleet's resources by
// kind field (listeners, ...), each in Envoy's JSON with its field names,
// secret material redacted.
type ConfigDump struct {
	Fleet     string                       `json:"fleet"`
	Replica   string                       `json:"replica"`
	Resources map[string][]json.RawMessage `json:"resources"`
}

// RecordedHistory is a replica's answer at HistoryPath: the fleet's
// history as recorded in the operator's namespace, as Shown shows it.
type RecordedHistory struct {
	Fleet   string `json:"fleet"`
	Replica string `json:"replica"`
	// Recorded is false when the fleet has no history: it was never
	// published.
	Recorded bool            `json:"recorded"`
	History  publish.History `json:"history"`
}

// VersionInfo is a replica's answer at VersionPath.
type VersionInfo struct {
	Replica  string `json:"replica"`
	Version  string `json:"version"`
	Revision string `json:"revision"`
}
