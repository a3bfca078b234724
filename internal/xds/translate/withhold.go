package translate

import (
	"encoding/json"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// A rejection stays with its author. When every proxy of a fleet rejects a
// revision, the rejection is attributed (Attribute) to the EnvoyConfigs whose
// change it refused, and their content is withheld (Input.Withheld): while an
// EnvoyConfig's content is the one rejected, the fleet's revisions take its
// content from before the change instead, or none of it, and the other
// EnvoyConfigs' changes are served as if it had not changed.

// Withheld is an EnvoyConfig's content that the fleet's proxies rejected.
type Withheld struct {
	// Content is the rejected content's ContentOf.
	Content string `json:"content"`
	// Version is the fleet's revision that every proxy rejected, or, with
	// Rollout, that a proxy of its rollout's step rejected.
	Version string `json:"version"`
	// Rollout: the rejection aborted the revision's rollout, whose other
	// proxies were never served it.
	Rollout bool `json:"rollout,omitempty"`
	// Analysis: what aborted the rollout was not a rejection but the
	// figures of a proxy of its step, beyond the rollout's analysis limits
	// in a scope the change touched; Detail says them, and Node is that
	// proxy.
	Analysis bool `json:"analysis,omitempty"`
	// TypeURL is the type the proxies rejected ("" when not known); Detail
	// the error_detail a proxy gave, and Node that proxy's node id.
	TypeURL string `json:"typeURL,omitempty"`
	Detail  string `json:"detail"`
	Node    string `json:"node,omitempty"`
	// Previous is the EnvoyConfig's content before the rejected change
	// (Recorded), which the fleet takes instead; nil when it had none.
	Previous *Config `json:"previous,omitempty"`
}

// ContentOf is a short hash of the content of c that a revision records.
func ContentOf(c Config) string {
	b, _ := json.Marshal(c.Recorded().Spec)
	h := resource.NewHash()
	h.Add(c.Name, b)
	return h.Sum()
}

// Attribute returns the names of the EnvoyConfigs of the rejected revision
// that a rejection of its type typeURL (of any type when "") with the
// error_detail detail is attributed to: those that contribute a resource of
// that type, of a name, that the accepted revision (nil when none was) does
// not hold with the same content; of those, the ones whose changed resources
// detail names, when it names any. Envoy names the listeners and clusters
// it refuses, so a rejection of one EnvoyConfig's listener is its own even
// when another EnvoyConfig changed a listener too. None is returned when no
// EnvoyConfig changed a resource of the type: the rejection cannot be
// attributed, as when it refuses endpoints or a certificate that the
// Services and Secrets give.
func Attribute(rejected, accepted []Config, typeURL, detail string) []string {
	before := map[string]map[contributionKey]string{}
	for _, c := range accepted {
		before[c.Name] = contributions(c)
	}
	changed := map[string][]string{} // EnvoyConfig -> the names of its changed resources
	for _, c := range rejected {
		for k, content := range contributions(c) {
			if (typeURL == "" || k.typeURL == typeURL) && before[c.Name][k] != content {
				changed[c.Name] = append(changed[c.Name], k.name)
			}
		}
	}
	var named []string
	for c, names := range changed {
		for _, n := range names {
			if mentions(detail, n) {
				named = append(named, c)
				break
			}
		}
	}
	if len(named) == 0 {
		for c := range changed {
			named = append(named, c)
		}
	}
	sort.Strings(named)
	return named
}

type contributionKey struct{ typeURL, name string }

// contributions returns the resources c contributes to a revision, by type
// and name, each as its content: its valid resources, and the entries of
// spec.serviceEndpoints and spec.tlsSecrets that become endpoints and
// secrets (what the Services and Secrets give is not c's content).
func contributions(c Config) map[contributionKey]string {
	out := map[contributionKey]string{}
	p, _ := parse(c.Recorded())
	for _, r := range p.resources {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(r.Message)
		out[contributionKey{r.Kind.TypeURL, r.Name}] = string(b)
	}
	for _, se := range c.Spec.ServiceEndpoints {
		b, _ := json.Marshal(se)
		out[contributionKey{endpointKind.TypeURL, se.Cluster}] = string(b)
	}
	for _, ts := range c.Spec.TLSSecrets {
		b, _ := json.Marshal(ts)
		out[contributionKey{secretKind.TypeURL, ts.Name}] = string(b)
	}
	return out
}

// mentions reports whether detail names name as a word of its own: not
// inside a longer name.
func mentions(detail, name string) bool {
	if name == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(detail[from:], name)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(name)
		if (start == 0 || !nameByte(detail[start-1])) && (end == len(detail) || !nameByte(detail[end])) {
			return true
		}
		from = start + 1
	}
}

func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.'
}
