package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// This file is diff's functional core: from what the cluster holds (a
// world) and the files' changes, what each fleet the files touch is served
// now and would be served after, with the control plane's own stages: the
// webhook's admission (translate.Admit), then, as the operator's leader runs
// them, translation (translate.Translate), the publish decision
// (publish.Decide) and the rendering every replica serves
// (translate.Render).

// world is what diff starts from, in the namespaces the files touch.
type world struct {
	// policy is the operator's content policy, as the flags give it.
	policy translate.Policy
	// configs are the namespaces' EnvoyConfigs, by namespace/name, without
	// those being deleted (neither the webhook nor the controller counts
	// them).
	configs map[string]translate.Config
	// histories are the fleets' recorded histories; a fleet without one
	// was never published.
	histories map[fleet.ID]publish.History
	// slices are the EndpointSlices of the Services that the EnvoyConfigs
	// (live, recorded and of the files) name, by namespace and Service.
	slices map[string]map[string][]discoveryv1.EndpointSlice
	// secrets are the Secrets that their tlsSecrets name, by namespace and
	// name; only those the operator would read (labelled
	// names.XDSSecretLabel).
	secrets map[string]map[string]corev1.Secret
	// unreadable holds the Secrets, namespace/name, that the caller may
	// not read: what they serve is left out.
	unreadable map[string]bool
	// status holds what the operator recorded of the live EnvoyConfigs, by
	// namespace/name: the versions their status records as rejected.
	status map[string]recordedStatus
	// offline: no cluster was read; slices and secrets are empty.
	offline bool
}

// recordedStatus is a live EnvoyConfig's generation and status.
type recordedStatus struct {
	generation int64
	status     examplev1.EnvoyConfigStatus
}

// rejections returns the versions that the status of configs, the
// EnvoyConfigs of a fleet, records as rejected by every proxy, as the
// leader reads them (publish.RejectionsOf) once configs are stored: each
// with its spec and the live EnvoyConfig's status, which vouches for
// nothing once the spec changes.
func (w world) rejections(configs []translate.Config, offered string) publish.Rejections {
	objs := make([]*examplev1.EnvoyConfig, 0, len(configs))
	for _, c := range configs {
		o := &examplev1.EnvoyConfig{Spec: c.Spec}
		if live, ok := w.status[c.Name]; ok {
			o.Generation, o.Status = live.generation, live.status
		}
		objs = append(objs, o)
	}
	return publish.RejectionsOf(objs, offered)
}

// change is one change the files make: an EnvoyConfig to create or update,
// or, with --prune, one to delete.
type change struct {
	// where names the file and document, or --prune.
	where  string
	config translate.Config
	delete bool
	// gateway: config is a Gateway's, as the operator translates it (no
	// webhook admits it: what is wrong in it is reported in status).
	gateway bool
}

// diffReport is what diff found.
type diffReport struct {
	Fleets []fleetDiff `json:"fleets"`
	// Refused are the changes admission would refuse, in the order they
	// would be applied. A refused change is not in the fleets' diffs: it
	// would not be stored.
	Refused []refusal `json:"refused,omitempty"`
	// EnvoyRefused are the fleets whose would-be configuration a real Envoy
	// refuses (--envoy), in Envoy's words.
	EnvoyRefused []refusal `json:"envoyRefused,omitempty"`
}

// refusal is a change that would not get in, and why: for admission, in
// the webhook's words.
type refusal struct {
	Where       string `json:"where"`
	EnvoyConfig string `json:"envoyConfig,omitempty"`
	Message     string `json:"message"`
}

// fleetDiff is what changes for one fleet's proxies.
type fleetDiff struct {
	Fleet string `json:"fleet"`
	// Version is the version its proxies are served now ("" when nothing
	// was published), NewVersion the one they would be served.
	Version    string `json:"version,omitempty"`
	NewVersion string `json:"newVersion,omitempty"`
	// Types holds the types that change, in the order of resource.Kinds.
	Types []typeDiff `json:"types,omitempty"`
	// Notes say what else the operator would report about the change.
	Notes []string `json:"notes,omitempty"`
	// now is what the fleet is served now, next what it would be served.
	now, next map[string][]types.Resource
}

// typeDiff is what changes in one type's resources.
type typeDiff struct {
	Type    string            `json:"type"`
	Added   []addedResource   `json:"added,omitempty"`
	Removed []string          `json:"removed,omitempty"`
	Changed []changedResource `json:"changed,omitempty"`
}

// addedResource is a resource the fleet would get, whole, in Envoy's JSON.
type addedResource struct {
	Name     string          `json:"name"`
	Resource json.RawMessage `json:"resource"`
}

// changedResource is a resource whose content would change, field by field.
type changedResource struct {
	Name   string        `json:"name"`
	Fields []fieldChange `json:"fields"`
}

// changed reports whether the report holds any change to what is served.
func (r diffReport) changed() bool {
	for _, f := range r.Fleets {
		if len(f.Types) > 0 {
			return true
		}
	}
	return false
}

// fleetConfigs returns the EnvoyConfigs of configs that belong to f, by name.
func fleetConfigs(configs map[string]translate.Config, f fleet.ID) []translate.Config {
	var out []translate.Config
	for _, c := range configs {
		if fleetOf(c) == f {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// plan applies changes to w, in order, as kubectl apply would store them:
// each one admission lets in, judged against what the ones before it left,
// as the webhook judges it. It returns what changes for each fleet the
// changes touch, and what admission would refuse. now is when the changes
// are applied: the creation time of new EnvoyConfigs, which decides name
// clashes (the older one wins).
func plan(w world, changes []change, now time.Time) diffReport {
	var r diffReport
	after := make(map[string]translate.Config, len(w.configs))
	for name, c := range w.configs {
		after[name] = c
	}
	touched := map[fleet.ID]bool{}
	changedConfigs := map[string]bool{}
	for i, ch := range changes {
		c := ch.config
		_, short := splitName(c.Name)
		live, exists := after[c.Name]
		if exists {
			touched[fleetOf(live)] = true
		}
		if ch.delete {
			if !exists {
				continue
			}
			if problems := admit(w.policy, ch, fleetConfigs(after, fleetOf(live)), nil); len(problems) > 0 {
				r.Refused = append(r.Refused, refusal{Where: ch.where, EnvoyConfig: c.Name, Message: translate.Refusal(short, true, problems)})
				continue
			}
			delete(after, c.Name)
			changedConfigs[c.Name] = true
			continue
		}
		touched[fleetOf(c)] = true
		switch {
		case exists && sameSpec(live, c):
			continue // kubectl apply sends nothing: no admission, no change
		case ch.gateway:
			// Created when its Gateway was, as translated.
		case exists:
			c.Created = live.Created
		default:
			c.Created = now.Add(time.Duration(i) * time.Millisecond)
		}
		if problems := admit(w.policy, ch, fleetConfigs(after, fleetOf(c)), &c); len(problems) > 0 {
			r.Refused = append(r.Refused, refusal{Where: ch.where, EnvoyConfig: c.Name, Message: translate.Refusal(short, false, problems)})
			continue
		}
		after[c.Name] = c
		changedConfigs[c.Name] = true
	}

	for _, f := range sortedFleets(touched) {
		r.Fleets = append(r.Fleets, diffFleet(w, f, fleetConfigs(w.configs, f), fleetConfigs(after, f), changedConfigs))
	}
	return r
}

// admit is the webhook's verdict on change ch of an EnvoyConfig (c, or nil
// for a deletion) among fleet, the fleet's Configs: translate.Admit. A
// Gateway's Config is admitted by no webhook: what is wrong in it the
// operator reports in the Gateway's and the routes' status.
func admit(pol translate.Policy, ch change, fleet []translate.Config, c *translate.Config) []string {
	if ch.gateway {
		return nil
	}
	return translate.Admit(pol, fleet, ch.config.Name, c)
}

// diffFleet compares what fleet f is served now, its recorded revision
// rendered with live (its EnvoyConfigs as they are), with what it would be
// served once the operator has run on after.
func diffFleet(w world, f fleet.ID, live, after []translate.Config, changedConfigs map[string]bool) fleetDiff {
	hist := w.histories[f]
	slices, secrets := w.slices[f.Namespace], w.secrets[f.Namespace]
	d := fleetDiff{Fleet: f.String(), Version: hist.Current}

	now := map[string][]types.Resource{}
	var published []translate.Config
	if rev := hist.Served(); rev != nil {
		published = rev.Configs
		now, _ = translate.Render(w.policy, rev.Configs, live, slices, secrets)
		pending := translate.Translate(translate.Input{Configs: live, Published: published, Slices: slices, Secrets: secrets, Policy: w.policy, Withheld: hist.Withheld})
		if publish.Decide(hist, pending, publish.Acks{}, w.rejections(live, pending.Version)).Action == publish.Publish {
			d.Notes = append(d.Notes, fmt.Sprintf("the operator has not published the fleet's EnvoyConfigs as they are yet (version %s): the diff includes those changes too", pending.Version))
		}
	}

	if hist.Served() == nil && len(after) == 0 {
		return d // a fleet that never had an EnvoyConfig: nothing is recorded or served
	}
	ir := translate.Translate(translate.Input{Configs: after, Published: published, Slices: slices, Secrets: secrets, Policy: w.policy, Withheld: hist.Withheld})
	decision := publish.Decide(hist, ir, publish.Acks{}, w.rejections(after, ir.Version))
	next := map[string][]types.Resource{}
	if rev := decision.History.Served(); rev != nil {
		d.NewVersion = decision.History.Current
		next, _ = translate.Render(w.policy, rev.Configs, after, slices, secrets)
	}
	if len(ir.Held) > 0 {
		d.Notes = append(d.Notes, "the fleet would be held on its published revision: "+strings.Join(ir.Held, "; "))
	}
	if decision.Action == publish.Hold {
		d.Notes = append(d.Notes, decision.Message)
	}
	for _, c := range after {
		if w := ir.Configs[c.Name].Withheld; w != nil {
			d.Notes = append(d.Notes, fmt.Sprintf("version %s was rejected by every proxy (proxy %q: %s): the change of EnvoyConfig %s is withheld until its content changes, and the fleet's other EnvoyConfigs are served",
				w.Version, w.Node, w.Detail, c.Name))
		}
	}
	for _, c := range after {
		if !changedConfigs[c.Name] {
			continue
		}
		st := ir.Configs[c.Name]
		groups := [][]string{st.Clashes}
		if !w.offline { // offline, no EndpointSlice or Secret is read
			groups = append(groups, st.Endpoints)
			if !namesUnreadable(w, c) {
				groups = append(groups, st.Secrets)
			}
		}
		for _, group := range groups {
			for _, msg := range group {
				d.Notes = append(d.Notes, fmt.Sprintf("%s: %s", translate.SourceOf(c.Name), msg))
			}
		}
	}

	d.now, d.next = now, next
	before, err := debug.Dump(f.String(), "", now, "")
	if err != nil {
		d.Notes = append(d.Notes, err.Error())
		return d
	}
	later, err := debug.Dump(f.String(), "", next, "")
	if err != nil {
		d.Notes = append(d.Notes, err.Error())
		return d
	}
	for _, k := range resource.Kinds {
		if td := diffType(k.Field, named(now[k.TypeURL], before.Resources[k.Field]), named(next[k.TypeURL], later.Resources[k.Field])); td != nil {
			d.Types = append(d.Types, *td)
		}
	}
	return d
}

// named pairs each resource's name with its JSON (debug.Dump keeps the
// order of the resources it is given).
func named(resources []types.Resource, js []json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(resources))
	for i, r := range resources {
		out[cachev3.GetResourceName(r)] = js[i]
	}
	return out
}

// diffType compares one type's resources, by name; nil when nothing changes.
func diffType(field string, before, after map[string]json.RawMessage) *typeDiff {
	td := typeDiff{Type: field}
	for _, name := range sortedNames(after) {
		if _, ok := before[name]; !ok {
			td.Added = append(td.Added, addedResource{Name: name, Resource: after[name]})
		}
	}
	for _, name := range sortedNames(before) {
		next, ok := after[name]
		if !ok {
			td.Removed = append(td.Removed, name)
			continue
		}
		if fields := diffFields(before[name], next); len(fields) > 0 {
			td.Changed = append(td.Changed, changedResource{Name: name, Fields: fields})
		}
	}
	if len(td.Added)+len(td.Removed)+len(td.Changed) == 0 {
		return nil
	}
	return &td
}

func sortedNames(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// assumedHistory is fleet f's history when diff does not read the recorded
// one (offline, or when it cannot be read): as if the operator had
// published its EnvoyConfigs as they are, with no history; a version their
// status records as rejected is then not served. (What translation serves
// depends on the EnvoyConfigs only: EndpointSlices and Secrets are rendered
// live.)
func (w world) assumedHistory(f fleet.ID) publish.History {
	live := fleetConfigs(w.configs, f)
	ir := translate.Translate(translate.Input{Configs: live, Policy: w.policy})
	return publish.Decide(publish.History{}, ir, publish.Acks{}, w.rejections(live, ir.Version)).History
}

// unredacted returns h, a fleet's history as the operator's debug endpoint
// shows it, with the content its served revision records. The endpoint
// redacts secret material (debug.Shown), which an EnvoyConfig stored before
// admission refused it inline may hold: an EnvoyConfig of live whose
// content, redacted, is what the revision shows is what it records. exact
// is false when the revision's content is then still not what its version
// hashes to: an inline key changed since, and what is served now is shown
// redacted.
func unredacted(h publish.History, live []translate.Config) (out publish.History, exact bool) {
	h.Revisions = slices.Clone(h.Revisions)
	rev := h.Served()
	if rev == nil {
		return h, true
	}
	byName := make(map[string]translate.Config, len(live))
	for _, c := range live {
		byName[c.Name] = c.Recorded()
	}
	configs := make([]translate.Config, len(rev.Configs))
	for i, c := range rev.Configs {
		configs[i] = c
		if l, ok := byName[c.Name]; ok {
			if r, err := debug.RedactConfig(l); err == nil && sameSpec(r, c) {
				configs[i].Spec = l.Spec
			}
		}
	}
	rev.Configs = configs
	return h, translate.VersionOf(configs) == rev.Version
}

// sameSpec reports whether a and b have the same spec, whatever the order
// of keys and the spacing of their resources' JSON.
func sameSpec(a, b translate.Config) bool {
	decode := func(c translate.Config) any {
		js, err := json.Marshal(c.Spec)
		if err != nil {
			return nil
		}
		v, err := decodeJSON(js)
		if err != nil {
			return nil
		}
		return v
	}
	va, vb := decode(a), decode(b)
	return va != nil && reflect.DeepEqual(va, vb)
}

// namesUnreadable reports whether c's tlsSecrets name a Secret the caller
// may not read: translation cannot tell whether it serves a secret.
func namesUnreadable(w world, c translate.Config) bool {
	ns, _ := splitName(c.Name)
	for _, ts := range c.Spec.TLSSecrets {
		if w.unreadable[ns+"/"+ts.SecretRef] {
			return true
		}
	}
	return false
}
