// Package report is the format of the replicas' reports of their proxies:
// each replica writes what the proxies connected to it answered, split by
// fleet into shards (ConfigMaps of the operator's namespace), and the
// leader reads every replica's shards back and adds them up (Sum) for the
// publish stage. The format is pure; the server's reporter writes it.
package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// Every replica serves xDS to the proxies connected to it, and reports what
// they answered in ConfigMaps of its own, in the operator's namespace: its
// report, split by a hash of the fleet into shards, as many as keep each
// within ShardBytes. Their number is a power of two, doubled as the report
// grows, so that a report of any size fits, and a change of one fleet
// rewrites one shard. The leader adds every shard of every replica up
// (Sum): status and rollbacks count the proxies of every replica.
const (
	// Component is names.ComponentLabel's value on a shard of a replica's report.
	Component = "xds-proxies"
	// ReplicaAnnotation names the replica a report comes from.
	ReplicaAnnotation = "kube-envoy-controller.io/replica"
	// ShardAnnotation says which shard of its replica's report a ConfigMap
	// holds, as <index>/<count>.
	ShardAnnotation = "kube-envoy-controller.io/report-shard"
	// ShardBytes bounds the data of one shard. A fleet's entry takes the
	// length of its identity and about 60 bytes, and up to publish.MaxDetail and
	// 350 more (the type and the proxy) while its proxies reject a version;
	// while a revision rolls out, each proxy adds its node id and about 40
	// bytes (and a rejection's detail), and its stats window
	// (publish.Window): 355 bytes with three scopes that served requests
	// in it (scope names of 13 to 16 bytes, counts of three digits), 823
	// with every figure and bucket at six digits. A fleet's entry is in one
	// shard: one that outgrows ShardBytes is alone in its shard, up to
	// MaxEntryBytes.
	ShardBytes = 256 << 10
	// MaxEntryBytes bounds one fleet's entry, alone in its shard: the
	// windows of about 2,000 proxies of three scopes, on one replica
	// (ConfigMaps hold at most 1 MiB). A rolling fleet's entry that would
	// outgrow it is reported without its proxies' windows (Shards).
	MaxEntryBytes = 960 << 10
	// MaxShards bounds a replica's shards: ShardBytes × MaxShards holds the
	// entries of far more fleets than a replica can hold proxies of.
	MaxShards  = 1024
	reportKey  = "proxies.json"
	reportBase = "kube-envoy-controller-xds-proxies-"
)

// FleetProxies is what one replica's proxies of one fleet answered.
type FleetProxies struct {
	// Version is the revision the replica serves the fleet.
	Version   string `json:"version"`
	Connected int    `json:"connected"`
	Acked     int    `json:"acked,omitempty"`
	Nacked    int    `json:"nacked,omitempty"`
	LastNACK  string `json:"lastNACK,omitempty"`
	// LastNACKType is the type that rejection refused, and LastNACKNode the
	// proxy that gave it; a replica of an earlier release leaves them out.
	LastNACKType string `json:"lastNACKType,omitempty"`
	LastNACKNode string `json:"lastNACKNode,omitempty"`
	// Proxies is what each proxy answered, by node id, while a revision of
	// the fleet rolls out: the leader steps the rollout on from them
	// (publish.StepRollout). Left out otherwise, so that a settled fleet's
	// entry does not grow with its proxies.
	Proxies map[string]publish.ProxyAnswer `json:"proxies,omitempty"`
}

// Equal reports whether f and o are the same entry.
func (f FleetProxies) Equal(o FleetProxies) bool {
	return reflect.DeepEqual(f, o)
}

// Report is one replica's proxies, by fleet ID; fleets without a connected
// proxy are left out.
type Report map[string]FleetProxies

// Changed returns the fleets whose entries differ between a and b.
func Changed(a, b Report) []string {
	var out []string
	for id, fa := range a {
		if fb, ok := b[id]; !ok || !reflect.DeepEqual(fa, fb) {
			out = append(out, id)
		}
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Sum counts a fleet's proxies on every replica with respect to the revision
// version: a replica that serves another revision adds connected proxies
// that answered neither way.
func Sum(reports []Report, fleetID, version string) publish.Acks {
	var a publish.Acks
	for _, r := range reports {
		f, ok := r[fleetID]
		if !ok {
			continue
		}
		a.Connected += f.Connected
		if f.Version != version {
			continue
		}
		a.Acked += f.Acked
		a.Nacked += f.Nacked
		if f.LastNACK != "" {
			a.LastNACK, a.LastNACKType, a.LastNACKNode = f.LastNACK, f.LastNACKType, f.LastNACKNode
		}
	}
	return a
}

// Behind reports whether a replica with proxies of fleetID connected
// reports serving them another revision than version: their answers to
// version are not in the reports yet.
func Behind(reports []Report, fleetID, version string) bool {
	for _, r := range reports {
		if f, ok := r[fleetID]; ok && f.Connected > 0 && f.Version != version {
			return true
		}
	}
	return false
}

// Answers gathers what each of a fleet's proxies answered, on every
// replica, by node id. A proxy connected to two replicas at once (as it
// moves from one to the other) answers as the one where it answered; its
// window (publish.ProxyAnswer.Window) is that of a replica that reports
// one with the same accepted version, the one where it answered first:
// its stats may come to the other. It returns nil until every replica
// with a proxy of the fleet lists its proxies (it serves the fleet's
// rollout): a step chosen among the proxies of some replicas would take
// in more of the others than it should.
func Answers(reports []Report, fleetID string) map[string]publish.ProxyAnswer {
	out := map[string]publish.ProxyAnswer{}
	for _, r := range reports {
		f, ok := r[fleetID]
		if ok && f.Connected > 0 && len(f.Proxies) == 0 {
			return nil
		}
		for node, a := range f.Proxies {
			prev, ok := out[node]
			switch {
			case !ok || !answered(prev) && answered(a):
				out[node] = a
			case prev.Window == nil && a.Window != nil && a.Acked == prev.Acked:
				prev.Window = a.Window
				out[node] = prev
			}
		}
	}
	return out
}

// answered reports whether a proxy answered a version either way.
func answered(a publish.ProxyAnswer) bool {
	return a.Acked != "" || a.Nacked != "" || a.Detail != "" || a.Type != ""
}

// Name is the name that the shards of replica's report start with;
// each adds -<index>.
func Name(replica string) string {
	const maxBase = 253 - len("-1023")
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, replica)
	name = strings.Trim(reportBase+name, "-.")
	if len(name) > maxBase || name != reportBase+replica {
		sum := sha256.Sum256([]byte(replica))
		short := name
		if len(short) > maxBase-9 {
			short = short[:maxBase-9]
		}
		name = strings.Trim(short, "-.") + "-" + hex.EncodeToString(sum[:4])
	}
	return name
}

// ShardName is the name of shard index of replica's report.
func ShardName(replica string, index int) string {
	return Name(replica) + "-" + strconv.Itoa(index)
}

// ShardOf returns the shard, of count, that holds fleetID's entry.
func ShardOf(fleetID string, count int) int {
	h := fnv.New64a()
	h.Write([]byte(fleetID))
	return int(h.Sum64() % uint64(count))
}

// Shards returns the ConfigMaps, in namespace, of replica's report r:
// as many as the least power of two, atLeast or more, for which each
// shard's data fits ShardBytes, or holds one fleet's entry alone within
// MaxEntryBytes. An entry larger than that is written without its
// proxies' windows: the leader has their answers, and takes the proxies
// for silent (publish.Window).
func Shards(namespace, replica string, r Report, atLeast int) ([]*corev1.ConfigMap, error) {
	r = withinEntryBytes(r)
	count := 1
	for count < atLeast {
		count *= 2
	}
	for ; count <= MaxShards; count *= 2 {
		data, fits := split(r, count)
		if !fits {
			continue
		}
		out := make([]*corev1.ConfigMap, count)
		for i := range out {
			out[i] = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:      ShardName(replica, i),
					Namespace: namespace,
					Labels:    map[string]string{names.ManagedByLabel: names.ManagedByValue, names.ComponentLabel: Component},
					Annotations: map[string]string{
						ReplicaAnnotation: replica,
						ShardAnnotation:   strconv.Itoa(i) + "/" + strconv.Itoa(count),
					},
				},
				Data: map[string]string{reportKey: data[i]},
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("the report of %d fleets does not fit %d ConfigMaps of %d KiB", len(r), MaxShards, ShardBytes>>10)
}

// split encodes r's entries into count shards, and reports whether each
// fits ShardBytes.
func split(r Report, count int) ([]string, bool) {
	shards := make([]Report, count)
	for id, f := range r {
		i := ShardOf(id, count)
		if shards[i] == nil {
			shards[i] = Report{}
		}
		shards[i][id] = f
	}
	out := make([]string, count)
	for i, s := range shards {
		if s == nil {
			s = Report{}
		}
		b, _ := json.Marshal(s) // maps are encoded in key order: the same report is the same bytes
		if len(b) > ShardBytes && (len(s) > 1 || len(b) > MaxEntryBytes) {
			return nil, false
		}
		out[i] = string(b)
	}
	return out, true
}

// withinEntryBytes returns r, with the windows left out of each entry
// that would outgrow MaxEntryBytes with them.
func withinEntryBytes(r Report) Report {
	var out Report
	for id, f := range r {
		if !hasWindows(f) {
			continue
		}
		if b, _ := json.Marshal(Report{id: f}); len(b) <= MaxEntryBytes {
			continue
		}
		if out == nil {
			out = maps.Clone(r)
		}
		proxies := make(map[string]publish.ProxyAnswer, len(f.Proxies))
		for node, a := range f.Proxies {
			a.Window = nil
			proxies[node] = a
		}
		f.Proxies = proxies
		out[id] = f
	}
	if out == nil {
		return r
	}
	return out
}

func hasWindows(f FleetProxies) bool {
	for _, a := range f.Proxies {
		if a.Window != nil {
			return true
		}
	}
	return false
}

// ShardCount returns the number of shards of the report that cm is a shard
// of, or 0 when it does not say.
func ShardCount(cm metav1.Object) int {
	_, count, ok := strings.Cut(cm.GetAnnotations()[ShardAnnotation], "/")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n < 1 || n > MaxShards {
		return 0
	}
	return n
}

// Is reports whether o is a shard of a replica's report.
func Is(o metav1.Object) bool { return o.GetLabels()[names.ComponentLabel] == Component }

// Read reads the part of a replica's report that cm, one of its shards, holds.
func Read(cm *corev1.ConfigMap) (Report, error) {
	r := Report{}
	if s := cm.Data[reportKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return r, nil
}
