// Package translate is the first stage of the control plane, and pure: it
// turns a fleet's EnvoyConfigs and the EndpointSlices and Secrets they use
// into the fleet's intermediate representation, the IR: which content of each
// EnvoyConfig is served, the Envoy resources the fleet gets, and what is
// wrong with each EnvoyConfig. Admission (Admit) and the controller
// (Translate) decide with the same functions.
//
// Two rules it keeps. First, content that the content policy refuses
// (Policy: files, environment variables, configuration from elsewhere, and
// destinations that cross from what the EnvoyConfig's author may reach into
// what only the proxy's pod may) is never served: an EnvoyConfig that holds
// any is served nothing, and a revision recorded before holds nothing of it
// either. Admission refuses it first; the controller checks again, because
// admission can be bypassed.
//
// Second, a proxy never loses configuration because another
// EnvoyConfig changed. A change whose content is invalid, that a real Envoy
// refused to load (Input.Envoy: translation runs no Envoy, it is told what
// one said), or whose references lead nowhere, is not served: its
// EnvoyConfig's published content is, if it has any. When a change
// elsewhere breaks the references of content that is served (a cluster a
// route needs was removed or its EnvoyConfig deleted), the fleet is held:
// it keeps serving its published revision whole, until the references are
// whole again.
package translate

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Config is one EnvoyConfig of a fleet.
type Config struct {
	// Name is the EnvoyConfig's namespace/name.
	Name string `json:"name"`
	// Created orders configs: on a name clash the older one's resource wins.
	Created time.Time                 `json:"created"`
	Spec    examplev1.EnvoyConfigSpec `json:"spec"`
}

// Recorded returns c as a revision records it: without its inline secrets,
// which are served from the EnvoyConfigs as they are now and never stored
// elsewhere. Its spec.tlsSecrets are recorded: they name Secrets, whose
// content is read as it is now and never recorded either.
func (c Config) Recorded() Config {
	c.Spec.Resources.Secrets = nil
	return c
}

// sameContent reports whether a and b serve the same recorded content.
func sameContent(a, b Config) bool {
	ja, _ := json.Marshal(a.Recorded().Spec)
	jb, _ := json.Marshal(b.Recorded().Spec)
	return string(ja) == string(jb)
}

// Input is everything a fleet's IR is made from.
type Input struct {
	// Configs are the fleet's EnvoyConfigs, as they are now.
	Configs []Config
	// Published are the EnvoyConfigs as the fleet's published revision
	// serves them (Recorded); empty when nothing was published.
	Published []Config
	// Slices holds the EndpointSlices of the Services that
	// spec.serviceEndpoints name, by Service name.
	Slices map[string][]discoveryv1.EndpointSlice
	// Secrets holds the Secrets that spec.tlsSecrets name, by name, among
	// those labelled names.XDSSecretLabel: the only ones the operator
	// reads. A name missing here is a Secret that does not exist or is not
	// labelled.
	Secrets map[string]corev1.Secret
	// Policy is what the EnvoyConfigs may have their proxies read and reach.
	Policy Policy
	// Withheld holds, by EnvoyConfig, content that the fleet's proxies
	// rejected: while an EnvoyConfig's content is that, it is not served.
	Withheld map[string]Withheld
	// Envoy holds, by EnvoyConfig, what a real Envoy said when it loaded
	// its current content alone (EnvoyVerdict). Content it refused is
	// treated as invalid content is: not served, its published content
	// served instead. An EnvoyConfig without a verdict for its current
	// content is translated on the rules alone, as content that a recorded
	// revision holds is (it was judged before it was recorded, or served
	// before Envoy judged).
	Envoy map[string]EnvoyVerdict
}

// EnvoyVerdict is what a real Envoy said of one EnvoyConfig's content.
type EnvoyVerdict struct {
	// Content is the ContentOf the content judged: the verdict says
	// nothing of other content.
	Content string `json:"content"`
	// Refused is Envoy's words when it refused to load the content, or did
	// not answer in time; empty when it loaded it.
	Refused string `json:"refused,omitempty"`
	// Unjudged is why no Envoy loaded the content, when none could: the
	// content is translated on the rules alone, and its status says so.
	Unjudged string `json:"unjudged,omitempty"`
}

// Loaded reports whether Envoy loaded the content: such a verdict changes
// nothing of a translation (Translate with it is Translate without it).
func (v EnvoyVerdict) Loaded() bool { return v.Refused == "" && v.Unjudged == "" }

// Choice says which content of an EnvoyConfig the fleet's next revision
// takes (IR.Revision).
type Choice string

const (
	// ChoiceCurrent: the EnvoyConfig as it is now.
	ChoiceCurrent Choice = "Current"
	// ChoicePublished: its published content, not the current one.
	ChoicePublished Choice = "Published"
	// ChoiceNone: none of it (it was never published).
	ChoiceNone Choice = "None"
)

// ConfigStatus is what translation found about one EnvoyConfig.
type ConfigStatus struct {
	Choice Choice `json:"served"`
	// Invalid holds its resources that do not decode or validate, and its
	// listeners whose address another EnvoyConfig's listener has.
	Invalid []string `json:"invalid,omitempty"`
	// Dangling holds its references that lead nowhere in the fleet.
	Dangling []string `json:"dangling,omitempty"`
	// Clashes holds the resources it shares a name with another EnvoyConfig.
	Clashes []string `json:"clashes,omitempty"`
	// Endpoints holds warnings about spec.serviceEndpoints, such as a port
	// that no EndpointSlice of the Service has.
	Endpoints []string `json:"endpoints,omitempty"`
	// Secrets holds the spec.tlsSecrets whose Secret serves nothing, and why:
	// it is missing, not labelled for the control plane, of another type, or
	// holds no certificate and key.
	Secrets []string `json:"secrets,omitempty"`
	// Refused holds what the content policy refuses in its resources. None
	// of its content is served, not even its published content when that
	// holds such content too.
	Refused []string `json:"refused,omitempty"`
	// InlineKeys holds its resources' secret material written inline, which
	// admission refuses. An EnvoyConfig stored before that (or past the
	// webhook) is still served as it is, so that an upgrade takes no
	// certificate away from a proxy, and told to move its keys to Secrets.
	InlineKeys []string `json:"inlineKeys,omitempty"`
	// Withheld is set while its content is one that the fleet's proxies
	// rejected (Input.Withheld): that content is not served.
	Withheld *Withheld `json:"withheld,omitempty"`
	// EnvoyRefused is what a real Envoy said when it refused to load its
	// current content (Input.Envoy): that content is not served.
	EnvoyRefused string `json:"envoyRefused,omitempty"`
	// EnvoyUnjudged is why no real Envoy loaded its current content, when
	// none could (Input.Envoy).
	EnvoyUnjudged string `json:"envoyUnjudged,omitempty"`
	// Content is its current content's ContentOf.
	Content string `json:"-"`
}

// IR is the fleet's intermediate representation.
type IR struct {
	// Revision is the fleet's next revision: the content chosen of each
	// EnvoyConfig (Recorded, sorted by name).
	Revision []Config
	// Version is the revision's version (VersionOf).
	Version string
	// Resources are the Envoy resources the fleet gets, by type URL: those of
	// Revision, the endpoints of their Services, the secrets of the Secrets
	// their tlsSecrets name, and the current EnvoyConfigs' inline secrets.
	Resources map[string][]types.Resource
	// Configs holds each current EnvoyConfig's status, by name.
	Configs map[string]ConfigStatus
	// Held, when set, is why the fleet keeps its published revision whole:
	// references of content it serves would lead nowhere.
	Held []string
}

// Translate makes the fleet's IR.
func Translate(in Input) IR {
	ir := IR{Configs: map[string]ConfigStatus{}}
	// Published content that the policy refuses (recorded before the policy
	// existed, or past it) is as if it had never been published.
	published := map[string]Config{}
	for _, p := range in.Published {
		if !in.Policy.refused(p) {
			published[p.Name] = p
		}
	}

	// choice is the content each EnvoyConfig offers: its current content, or
	// when that is invalid or refused its published content.
	choice := map[string]Config{}
	for _, c := range in.Configs {
		st := ConfigStatus{Choice: ChoiceCurrent, Content: ContentOf(c)}
		p, errs := parse(c)
		st.InlineKeys = inlineKeys(p.resources)
		st.Refused = in.Policy.refusals(c.Name, p.resources)
		w, withheld := in.Withheld[c.Name]
		withheld = withheld && w.Content == st.Content
		if v, ok := in.Envoy[c.Name]; ok && v.Content == st.Content {
			st.EnvoyRefused, st.EnvoyUnjudged = v.Refused, v.Unjudged
		}
		switch {
		case len(errs) > 0 || len(st.Refused) > 0 || st.EnvoyRefused != "":
			st.Invalid = messages(errs)
			st.Choice = ChoiceNone
			if p, ok := published[c.Name]; ok {
				choice[c.Name], st.Choice = p, ChoicePublished
			}
		case withheld:
			// Its content from before the change, unless the policy refuses it.
			st.Withheld, st.Choice = &w, ChoiceNone
			if p := w.Previous; p != nil && p.Name == c.Name && !in.Policy.refused(*p) {
				choice[c.Name], st.Choice = p.Recorded(), ChoicePublished
			}
		default:
			choice[c.Name] = c.Recorded()
		}
		ir.Configs[c.Name] = st
	}

	// A fleet grown past the bounds of its counts: the changes that grew it
	// are not served.
	for name, why := range in.Policy.Bounds.overgrown(choice, published) {
		st := ir.Configs[name]
		st.Invalid = append(st.Invalid, why...)
		st.Choice = ChoiceNone
		if p, ok := published[name]; ok {
			choice[name], st.Choice = p, ChoicePublished
		} else {
			delete(choice, name)
		}
		ir.Configs[name] = st
	}

	refusedNow := func(c Config) bool { return len(ir.Configs[c.Name].Refused) > 0 }
	// yielded holds the EnvoyConfigs not served because a change of the
	// fleet's Gateway took away what they used (brokenByGateway).
	yielded := map[string]Config{}

	// A change whose references lead nowhere falls back to what was
	// published. When references of unchanged content break, the change that
	// broke them is elsewhere (or a deleted EnvoyConfig): hold the fleet.
	for {
		// Two EnvoyConfigs that share a listener address: the one that
		// changed is not served.
		for name, why := range resolveSharedAddresses(choice, published, in.Configs) {
			st := ir.Configs[name]
			st.Invalid = append(st.Invalid, why...)
			st.Choice = ChoiceNone
			if _, ok := choice[name]; ok {
				st.Choice = ChoicePublished
			}
			ir.Configs[name] = st
		}
		dangling := checkReferences(mergeOf(configsOf(choice), in.Configs, refusedNow))
		if len(dangling) == 0 {
			break
		}
		progress := false
		for _, name := range sortedKeys(dangling) {
			st, current := ir.Configs[name]
			if !current {
				continue // a deleted EnvoyConfig's published content; unchanged by definition
			}
			st.Dangling = messages(dangling[name])
			if p, ok := published[name]; ok && sameContent(p, choice[name]) {
				ir.Configs[name] = st
				continue // unchanged: it cannot fall back
			}
			progress = true
			if p, ok := published[name]; ok {
				choice[name], st.Choice = p, ChoicePublished
			} else {
				delete(choice, name)
				st.Choice = ChoiceNone
			}
			ir.Configs[name] = st
		}
		if !progress {
			// References that a change of the fleet's Gateway broke: the
			// Gateway's change wins, and the EnvoyConfigs that used what it
			// no longer serves are not served, rather than the fleet held.
			broken := brokenByGateway(choice, published, yielded, dangling, refusedNow, in.Configs)
			for _, name := range broken {
				st, current := ir.Configs[name]
				if !current || IsGatewayConfig(name) {
					continue
				}
				st.Dangling = messages(dangling[name])
				yielded[name] = choice[name]
				delete(choice, name)
				st.Choice = ChoiceNone
				ir.Configs[name] = st
				progress = true
			}
		}
		if !progress {
			ir.Held = heldBecause(dangling)
			choice = published
			for name, st := range ir.Configs {
				p, ok := published[name]
				switch {
				case !ok:
					st.Choice = ChoiceNone
				case st.Choice == ChoiceCurrent && !sameContent(p, configNamed(in.Configs, name)):
					st.Choice = ChoicePublished
				}
				ir.Configs[name] = st
			}
			break
		}
	}

	ir.Revision = configsOf(choice)
	ir.Version = VersionOf(ir.Revision)
	var clashes map[string][]string
	// What choice holds passed the policy; of the current EnvoyConfigs,
	// translation has judged each.
	ir.Resources, clashes = render(in.Policy, ir.Revision, nil, in.Configs, refusedNow, in.Slices, in.Secrets)
	for name, st := range ir.Configs {
		st.Clashes = clashes[name]
		spec := configNamed(in.Configs, name).Spec
		st.Endpoints = endpointWarnings(in.Policy, namespaceOf(name), spec.ServiceEndpoints, in.Slices)
		st.Secrets = secretWarnings(spec.TLSSecrets, in.Secrets)
		ir.Configs[name] = st
	}
	return ir
}

// Render returns the resources a fleet gets from the content it serves:
// served's resources, the endpoints of the Services served's
// serviceEndpoints name (from slices), the secrets of the Secrets served's
// tlsSecrets name (from secrets, by Secret name), and the inline secrets of
// current (the EnvoyConfigs as they are now). An EnvoyConfig whose content
// pol refuses contributes nothing, whatever revision recorded it. It also
// returns, by EnvoyConfig, the resources that clash with another's. Every
// replica renders a revision with it, so every replica serves the same
// content.
func Render(pol Policy, served, current []Config, slices map[string][]discoveryv1.EndpointSlice, secrets map[string]corev1.Secret) (map[string][]types.Resource, map[string][]string) {
	return render(pol, served, pol.refused, current, pol.refused, slices, secrets)
}

// render is Render with the policy's verdicts: servedRefused and
// currentRefused tell the EnvoyConfigs of served and current whose content
// is refused; nil when all of them passed. pol judges the endpoints of
// their Services.
func render(pol Policy, served []Config, servedRefused func(Config) bool, current []Config, currentRefused func(Config) bool,
	slices map[string][]discoveryv1.EndpointSlice, secrets map[string]corev1.Secret) (map[string][]types.Resource, map[string][]string) {
	parsedConfigs := make([]parsed, 0, len(served)+len(current))
	for _, c := range served {
		if servedRefused == nil || !servedRefused(c.Recorded()) {
			parsedConfigs = append(parsedConfigs, withLive(pol, c.Recorded(), slices, secrets))
		}
	}
	parsedConfigs = append(parsedConfigs, inlineSecrets(current, currentRefused)...)
	merged, clashes := merge(parsedConfigs)
	return byType(merged), clashes
}

// VersionOf is the version of a revision of content served: a hash of
// that content.
func VersionOf(served []Config) string {
	h := resource.NewHash()
	for _, c := range served {
		b, _ := json.Marshal(c.Recorded().Spec)
		h.Add(c.Name, b)
	}
	return h.Sum()
}

// parsed is one EnvoyConfig's valid resources.
type parsed struct {
	name      string
	created   time.Time
	resources []resource.Resource
}

// parse returns c's valid resources, and an error for each that is not.
func parse(c Config) (parsed, []error) {
	resources, errs := resource.Parse(c.Name, c.Spec.Resources)
	errs = append(errs, duplicateSecretNames(c, resources)...)
	errs = append(errs, duplicateLoadAssignments(c, resources)...)
	return parsed{name: c.Name, created: c.Created, resources: resources}, errs
}

// withLive is c's valid resources with, for each of its serviceEndpoints,
// the load assignment that slices give it, and for each of its tlsSecrets,
// the secret that secrets give it (a placeholder, not served, when its
// Secret serves none).
func withLive(pol Policy, c Config, slices map[string][]discoveryv1.EndpointSlice, secrets map[string]corev1.Secret) parsed {
	p, _ := parse(c)
	for i, se := range c.Spec.ServiceEndpoints {
		p.resources = append(p.resources, resource.Resource{
			Kind: endpointKind, Name: se.Cluster, Message: LoadAssignment(pol, namespaceOf(c.Name), se, slices[se.Service]),
			Path: fmt.Sprintf("spec.serviceEndpoints[%d]", i), Source: c.Name,
		})
	}
	p.resources = append(p.resources, tlsSecretResources(c, secrets)...)
	return p
}

// inlineSecrets returns the valid inline secrets of current, the
// EnvoyConfigs as they are now: they are served as they are, whatever
// content of their EnvoyConfig is served, unless refused says the policy
// refuses their EnvoyConfig's content.
func inlineSecrets(current []Config, refused func(Config) bool) []parsed {
	out := make([]parsed, 0, len(current))
	for _, c := range current {
		if refused != nil && refused(c) {
			continue
		}
		p, _ := parse(Config{Name: c.Name, Created: c.Created,
			Spec: examplev1.EnvoyConfigSpec{Resources: examplev1.EnvoyResources{Secrets: c.Spec.Resources.Secrets}}})
		out = append(out, p)
	}
	return out
}

// mergeOf merges configs' resources, those of their serviceEndpoints and
// tlsSecrets, whose names are all that references need, and the inline
// secrets of current, which are served beside any revision unless the
// policy refuses their EnvoyConfig (see inlineSecrets).
func mergeOf(configs, current []Config, refused func(Config) bool) map[resourceKey]resource.Resource {
	ps := make([]parsed, 0, len(configs)+len(current))
	for _, c := range configs {
		ps = append(ps, withLive(Policy{}, c, nil, nil))
	}
	ps = append(ps, inlineSecrets(current, refused)...)
	merged, _ := merge(ps)
	return merged
}

func configsOf(m map[string]Config) []Config {
	out := make([]Config, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func configNamed(configs []Config, name string) Config {
	for _, c := range configs {
		if c.Name == name {
			return c
		}
	}
	return Config{}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func messages(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// brokenByGateway returns the EnvoyConfigs of dangling (whose references
// lead nowhere in choice) that a change of the fleet's Gateway broke: a
// reference of theirs that leads nowhere led somewhere with the Gateway's
// Config as published and the EnvoyConfigs that yielded to its change
// served; none when no Gateway's Config changed.
func brokenByGateway(choice, published, yielded map[string]Config, dangling map[string][]error, refused func(Config) bool, current []Config) []string {
	before := maps.Clone(choice)
	maps.Copy(before, yielded)
	changed := false
	for _, name := range sortedKeys(mergedKeys(choice, published)) {
		if !IsGatewayConfig(name) {
			continue
		}
		p, wasPublished := published[name]
		c, served := choice[name]
		switch {
		case wasPublished && served && sameContent(p, c):
			continue
		case wasPublished:
			before[name] = p
		default:
			delete(before, name)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	was := checkReferences(mergeOf(configsOf(before), current, refused))
	var out []string
	for _, name := range sortedKeys(dangling) {
		old := map[string]bool{}
		for _, e := range was[name] {
			old[e.Error()] = true
		}
		if slices.ContainsFunc(dangling[name], func(e error) bool { return !old[e.Error()] }) {
			out = append(out, name)
		}
	}
	return out
}

// mergedKeys returns the keys of a and b, once each.
func mergedKeys(a, b map[string]Config) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func heldBecause(dangling map[string][]error) []string {
	var out []string
	for _, name := range sortedKeys(dangling) {
		for _, e := range dangling[name] {
			out = append(out, fmt.Sprintf("EnvoyConfig %s: %v", name, e))
		}
	}
	return out
}

// namespaceOf returns the namespace of an EnvoyConfig named namespace/name.
func namespaceOf(name string) string {
	ns, _, _ := strings.Cut(name, "/")
	return ns
}

// FromObject returns an EnvoyConfig as translation sees it.
func FromObject(c *examplev1.EnvoyConfig) Config {
	return Config{Name: c.Namespace + "/" + c.Name, Created: c.CreationTimestamp.Time, Spec: c.Spec}
}
