// Package publish is the second stage of the control plane, and pure: a
// state machine that decides, for one fleet, which revision is served. The
// fleet's revision history, the IR of translation, the answers of the
// fleet's proxies (on every replica) and the versions known to be rejected
// go in; a decision (publish, hold, roll back or nothing) and the new
// history come out. It holds the history's type and its rules (publish.go),
// the rejections recorded outside it, in the EnvoyConfigs' status
// (rejections.go), and the state machine of a progressive rollout
// (rollout.go). How the history is recorded is internal/xds/history's; the
// replicas' reports of their proxies, which the leader adds up into Acks,
// are internal/xds/report's.
package publish

import (
	"cmp"
	"fmt"
	"maps"
	"strings"

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
	// Fleet is the fleet's identity, <namespace>/<name>, as recorded.
	Fleet string `json:"fleet,omitempty"`
	// Current is the version most recently published: served to every
	// proxy, or, while its rollout is under way, to the proxies of its
	// steps, and to none once the rollout is aborted (Rollout.Serves says
	// which, by proxy). "" when nothing is published: the only content
	// there is to serve was rejected, and no accepted one is known.
	Current   string     `json:"current"`
	Revisions []Revision `json:"revisions"`
	// Withheld holds, by EnvoyConfig, the content that every proxy rejected
	// in a revision, as Decide attributed it: translation serves the
	// EnvoyConfig's published content instead while its content is that.
	Withheld map[string]translate.Withheld `json:"withheld,omitempty"`
	// Rollout is the rollout of Current while it is under way or aborted
	// (Roll); nil when every proxy is served Current.
	Rollout *Rollout `json:"rollout,omitempty"`
}

// String lists the history's versions, most recent first, as
// "v1* v2+ v3!": * served, + acked, ! rejected.
func (h History) String() string {
	out := make([]string, 0, len(h.Revisions))
	for _, r := range h.Revisions {
		s := r.Version
		if r.Version == h.Current {
			s += "*"
		}
		if r.Acked {
			s += "+"
		}
		if r.Rejected != "" {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// Served returns the current revision (Current), or nil: the one every
// proxy is served unless a rollout of it is under way or aborted. (Its name
// is older than the glossary's word, current.)
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
	if len(h.Withheld) > 0 {
		out.Withheld = make(map[string]translate.Withheld, len(h.Withheld))
		maps.Copy(out.Withheld, h.Withheld)
	}
	if h.Rollout != nil {
		r := h.Rollout.clone()
		out.Rollout = &r
	}
	return out
}

// Acks counts a fleet's proxies, on every replica, with respect to the
// revision served. A proxy connected to a replica that does not serve that
// revision yet is connected, and neither acked nor nacked.
type Acks struct {
	Connected, Acked, Nacked int
	// LastNACK is the error_detail of a rejection of the revision;
	// LastNACKType the type it refused ("" when its replica did not say), and
	// LastNACKNode the proxy that gave it.
	LastNACK, LastNACKType, LastNACKNode string
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
	// Withheld names the EnvoyConfigs whose content this decision withholds,
	// each newly; History.Withheld says why.
	Withheld []string
}

// Changed reports whether the history must be written.
func (d Decision) Changed(prev History) bool {
	if d.History.Fleet != prev.Fleet || d.History.Current != prev.Current || len(d.History.Revisions) != len(prev.Revisions) ||
		!maps.Equal(d.History.Withheld, prev.Withheld) || (d.History.Rollout == nil) != (prev.Rollout == nil) ||
		d.History.Rollout != nil && !d.History.Rollout.equal(*prev.Rollout) {
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
			target := h.RollbackTarget()
			d.Withheld = h.withhold(*cur, cmp.Or(target, h.previous(cur.Version)), acks)
			blame := attribution(d.Withheld)
			if target != nil {
				d.Action = RollBack
				d.Message = fmt.Sprintf("every proxy rejected version %s (%s); version %s, which they accepted, is served again; %s",
					cur.Version, cur.Rejected, target.Version, blame)
				d.Events = append(d.Events, Event{Warning: true, Reason: examplev1.EnvoyEventRolledBack, Message: d.Message})
				cur.Configs = nil
				h.Current = target.Version
				h.moveToFront(target.Version)
			} else {
				d.Events = append(d.Events, Event{Warning: true, Reason: examplev1.EnvoyEventRejected, Message: fmt.Sprintf(
					"every proxy rejected version %s (%s), and none accepted an earlier one: it stays served; %s", cur.Version, cur.Rejected, blame)})
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
	h.pruneWithheld(ir)
	d.History = h
	return d
}

// withhold attributes the rejection of rev, whose content every proxy
// rejected, to the EnvoyConfigs whose change it refused since before (the
// revision served again, or the one published before rev; nil when there
// is none), and records their content as withheld, with the content each
// had in before, which the fleet takes instead. It returns their names, none
// when the rejection cannot be attributed.
func (h *History) withhold(rev Revision, before *Revision, acks Acks) []string {
	var base []translate.Config
	if before != nil {
		base = before.Configs
	}
	return h.withholdNamed(rev, before, acks, translate.Attribute(rev.Configs, base, acks.LastNACKType, acks.LastNACK))
}

// withholdNamed records as withheld the content that the EnvoyConfigs
// names have in rev, as withhold does once it attributed the rejection to
// them, and returns their names.
func (h *History) withholdNamed(rev Revision, before *Revision, acks Acks, names []string) []string {
	var base []translate.Config
	if before != nil {
		base = before.Configs
	}
	for _, name := range names {
		for _, c := range rev.Configs {
			if c.Name != name {
				continue
			}
			if h.Withheld == nil {
				h.Withheld = map[string]translate.Withheld{}
			}
			w := translate.Withheld{Content: translate.ContentOf(c), Version: rev.Version,
				TypeURL: acks.LastNACKType, Detail: rev.Rejected, Node: acks.LastNACKNode}
			for _, p := range base {
				if p.Name == name {
					w.Previous = &p
				}
			}
			h.Withheld[name] = w
		}
	}
	return names
}

// previous is the newest revision but version's that was not rejected and
// keeps its content, or nil.
func (h *History) previous(version string) *Revision {
	for i := range h.Revisions {
		if r := &h.Revisions[i]; r.Version != version && r.Rejected == "" && len(r.Configs) > 0 {
			return r
		}
	}
	return nil
}

// attribution says to whom a rejection was attributed (withheld).
func attribution(withheld []string) string {
	if len(withheld) == 0 {
		return "the rejection cannot be attributed to the change of an EnvoyConfig, so the fleet keeps its revision whole until the content changes"
	}
	return fmt.Sprintf("the rejection is attributed to EnvoyConfig %s: that change is withheld, and the fleet's other EnvoyConfigs are served",
		strings.Join(withheld, ", "))
}

// pruneWithheld forgets the withheld content of EnvoyConfigs that are gone
// or changed since (translation's ConfigStatus.Content).
func (h *History) pruneWithheld(ir translate.IR) {
	for name, w := range h.Withheld {
		if st, ok := ir.Configs[name]; !ok || st.Content != w.Content {
			delete(h.Withheld, name)
		}
	}
	if len(h.Withheld) == 0 {
		h.Withheld = nil
	}
}

// Rejections are versions known to be rejected by every proxy, as recorded
// outside the history (RejectionsOf).
type Rejections map[string]bool

// KnownRejection is the rejection of a revision that the history had lost,
// and the EnvoyConfigs' status recorded.
const KnownRejection = "as the fleet's EnvoyConfigs record in status.rejectedVersions"

// RollbackTarget is the newest acked revision that is not served and not
// rejected: what a rollback serves, and what a recorded history keeps the
// content of, with the served revision's, when it must drop the others'.
func (h *History) RollbackTarget() *Revision {
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
	target := h.RollbackTarget()
	keep := map[string]bool{}
	if h.Current != "" {
		keep[h.Current] = true
	}
	if h.Rollout != nil && h.Rollout.Previous != "" {
		keep[h.Rollout.Previous] = true // what the proxies outside the rollout are served
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

// Truncate cuts a proxy's error_detail to MaxDetail bytes, without the
// white space around it (Envoy ends some of its messages with a newline).
func Truncate(s string) string { return conditions.Truncate(strings.TrimSpace(s), MaxDetail) }
