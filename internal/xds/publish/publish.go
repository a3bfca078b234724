// Package publish is the second stage of the control plane, and pure: a
// state machine that decides, for one fleet, which revision is served. The
// fleet's revision history, the IR of translation, the answers of the
// fleet's proxies (on every replica) and the versions known to be rejected
// go in; a decision (publish, hold, roll back or nothing) and the new
// history come out. It is the only owner of the history and of how it is
// stored: store.go describes the ConfigMaps, in the operator's namespace,
// and checks what is read back; Store (storage.go), the one part that is
// not pure, alone reads and writes them, so that a restarted or another
// replica serves exactly what was decided, and nothing a tenant wrote.
package publish

import (
	"cmp"
	"fmt"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// MaxRevisions bounds a fleet's history.
const MaxRevisions = 5

// MaxDetail bounds a NACK's error_detail wherever it is kept; the xDS
// server cuts it to that as it arrives.
const MaxDetail = resource.MaxNACKDetail

// Revision is one version of a fleet's content that was published.
type Revision struct {
	Version string `json:"version"`
	// Configs is the content served (translate.IR.Revision). A rejected
	// revision that is no longer served keeps none: it is never served again.
	Configs []translate.Config `json:"configs,omitempty"`
	// Acked: every connected proxy accepted it. It may be rolled back to.
	Acked bool `json:"acked,omitempty"`
	// Rejected is set when every connected proxy rejected it: a proxy's
	// error_detail. It is not published again until its content changes.
	Rejected string `json:"rejected,omitempty"`
}

// History is a fleet's revisions, the most recently published first.
type History struct {
	// Fleet is the fleet's identity, <namespace>/<name>, as stored.
	Fleet string `json:"fleet,omitempty"`
	// Current is the version served; "" when nothing is: the only content
	// there is to serve was rejected, and no accepted one is known.
	Current   string     `json:"current"`
	Revisions []Revision `json:"revisions"`
}

// Served returns the revision served, or nil.
func (h History) Served() *Revision { return h.find(h.Current) }

// Find returns the revision of version, or nil.
func (h History) Find(version string) *Revision { return h.find(version) }

func (h History) find(version string) *Revision {
	for i := range h.Revisions {
		if h.Revisions[i].Version == version {
			return &h.Revisions[i]
		}
	}
	return nil
}

func (h History) clone() History {
	out := History{Fleet: h.Fleet, Current: h.Current, Revisions: make([]Revision, len(h.Revisions))}
	copy(out.Revisions, h.Revisions)
	return out
}

// Acks counts a fleet's proxies, on every replica, with respect to the
// revision served. A proxy connected to a replica that does not serve that
// revision yet is connected, and neither acked nor nacked.
type Acks struct {
	Connected, Acked, Nacked int
	// LastNACK is the error_detail of a rejection of the revision.
	LastNACK string
}

// Action is what a decision does.
type Action string

const (
	// Unchanged: the served revision stays, as it was.
	Unchanged Action = "Unchanged"
	// Publish: the IR's content becomes the served revision.
	Publish Action = "Publish"
	// Hold: the IR's content is a revision every proxy rejected; the served
	// revision stays.
	Hold Action = "Hold"
	// RollBack: every proxy rejected the served revision; the last one they
	// accepted is served again.
	RollBack Action = "RollBack"
)

// Event is an event a decision asks to record, on the fleet's Envoy (on its
// first EnvoyConfig without one). Its reason is examplev1.EnvoyEventRolledBack
// or examplev1.EnvoyEventRejected.
type Event struct {
	Warning         bool
	Reason, Message string
}

// Decision is what Decide decided.
type Decision struct {
	Action  Action
	History History
	Events  []Event
	// Message explains Hold and RollBack.
	Message string
}

// Changed reports whether the history must be written.
func (d Decision) Changed(prev History) bool {
	if d.History.Fleet != prev.Fleet || d.History.Current != prev.Current || len(d.History.Revisions) != len(prev.Revisions) {
		return true
	}
	for i, r := range d.History.Revisions {
		p := prev.Revisions[i]
		if r.Version != p.Version || r.Acked != p.Acked || r.Rejected != p.Rejected || len(r.Configs) != len(p.Configs) {
			return true
		}
	}
	return false
}

// Decide decides what the fleet is served next.
//
//  1. The served revision is judged by the fleet's proxies: accepted by all
//     of them, it is marked acked; rejected by all of them before any
//     accepted it, it is marked rejected, and the newest acked revision is
//     served again. With none to go back to, it stays served: a proxy keeps
//     what it had before, and there is nothing better to send.
//  2. The IR's content is published, unless it is a revision every proxy
//     rejected, by the history or by rejected (versions recorded as
//     rejected where the history is not, such as the EnvoyConfigs' status,
//     so that a lost history brings no rejected revision back): that waits
//     until its content changes. With nothing served yet, nothing is.
//  3. The history keeps the served revision, the newest acked one, the
//     IR's if it is rejected, and the most recent others, up to MaxRevisions.
func Decide(prev History, ir translate.IR, acks Acks, rejected Rejections) Decision {
	h := prev.clone()
	if rejected[ir.Version] {
		switch r := h.find(ir.Version); {
		case r == nil:
			h.Revisions = append(h.Revisions, Revision{Version: ir.Version, Rejected: KnownRejection})
		case r.Rejected == "" && !r.Acked: // the history knows better of a revision every proxy accepted
			r.Rejected = KnownRejection
		}
	}
	d := Decision{Action: Unchanged}
	if cur := h.Served(); cur != nil && acks.Connected > 0 {
		switch {
		case acks.Acked == acks.Connected:
			cur.Acked = true
		case acks.Nacked == acks.Connected && !cur.Acked && cur.Rejected == "":
			cur.Rejected = Truncate(cmp.Or(acks.LastNACK, "no error_detail given"))
			if target := h.rollbackTarget(); target != nil {
				d.Action = RollBack
				d.Message = fmt.Sprintf("every proxy rejected version %s (%s); version %s, which they accepted, is served again",
					cur.Version, cur.Rejected, target.Version)
				d.Events = append(d.Events, Event{Warning: true, Reason: examplev1.EnvoyEventRolledBack, Message: d.Message})
				cur.Configs = nil
				h.Current = target.Version
				h.moveToFront(target.Version)
			} else {
				d.Events = append(d.Events, Event{Warning: true, Reason: examplev1.EnvoyEventRejected, Message: fmt.Sprintf(
					"every proxy rejected version %s (%s), and none accepted an earlier one: it stays served", cur.Version, cur.Rejected)})
			}
		}
	}

	switch r := h.find(ir.Version); {
	case ir.Version == h.Current:
	case r != nil && r.Rejected != "":
		if d.Action == Unchanged {
			d.Action = Hold
			d.Message = fmt.Sprintf("version %s was rejected by every proxy (%s); it is not published again until the content changes", r.Version, r.Rejected)
		}
	default:
		acked := r != nil && r.Acked
		h.remove(ir.Version)
		h.Revisions = append([]Revision{{Version: ir.Version, Configs: ir.Revision, Acked: acked}}, h.Revisions...)
		h.Current = ir.Version
		if d.Action == Unchanged {
			d.Action = Publish
		}
	}
	h.prune(ir.Version)
	d.History = h
	return d
}

// Rejections are versions known to be rejected by every proxy, as recorded
// outside the history (RejectionsOf).
type Rejections map[string]bool

// KnownRejection is the rejection of a revision that the history had lost,
// and the EnvoyConfigs' status recorded.
const KnownRejection = "as the fleet's EnvoyConfigs record in status.rejectedVersions"

// rollbackTarget is the newest acked revision that is not served and not rejected.
func (h *History) rollbackTarget() *Revision {
	for i := range h.Revisions {
		r := &h.Revisions[i]
		if r.Version != h.Current && r.Acked && r.Rejected == "" {
			return r
		}
	}
	return nil
}

func (h *History) remove(version string) {
	out := h.Revisions[:0]
	for _, r := range h.Revisions {
		if r.Version != version {
			out = append(out, r)
		}
	}
	h.Revisions = out
}

func (h *History) moveToFront(version string) {
	r := *h.find(version)
	h.remove(version)
	h.Revisions = append([]Revision{r}, h.Revisions...)
}

// prune keeps the served revision, the rollback target, the revision of
// offered (the IR's version) when it is rejected, and the most recent
// others, up to MaxRevisions; a rejected revision that is not served keeps
// no content.
func (h *History) prune(offered string) {
	target := h.rollbackTarget()
	keep := map[string]bool{}
	if h.Current != "" {
		keep[h.Current] = true
	}
	if target != nil {
		keep[target.Version] = true
	}
	if r := h.find(offered); r != nil && r.Rejected != "" {
		keep[offered] = true
	}
	for _, r := range h.Revisions {
		if len(keep) >= MaxRevisions {
			break
		}
		keep[r.Version] = true
	}
	out := h.Revisions[:0]
	for _, r := range h.Revisions {
		if keep[r.Version] {
			if r.Rejected != "" && r.Version != h.Current {
				r.Configs = nil
			}
			out = append(out, r)
		}
	}
	h.Revisions = out
}

// Truncate cuts a proxy's error_detail to MaxDetail bytes.
func Truncate(s string) string { return conditions.Truncate(s, MaxDetail) }
