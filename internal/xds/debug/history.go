package debug

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Shown is what the endpoint shows of a fleet's recorded history h: every
// revision's version and whether every proxy accepted or rejected it, which
// is what publish.Decide needs to decide on new content, and the content of
// the served revision only, its secret material redacted (RedactConfig).
//
// A revision records its EnvoyConfigs without spec.resources.secrets, but
// an EnvoyConfig created before admission refused secret material inline
// may hold some in its listeners or clusters (a transport socket's private
// key), and is served, and recorded, all the same. The content of revisions
// that are not served, which may hold keys its EnvoyConfigs no longer
// hold, is not shown at all. The content an EnvoyConfig takes while its
// change is withheld is shown redacted, as the served revision's is.
func Shown(h publish.History) (publish.History, error) {
	out := publish.History{Fleet: h.Fleet, Current: h.Current, Revisions: make([]publish.Revision, 0, len(h.Revisions))}
	for _, r := range h.Revisions {
		shown := publish.Revision{Version: r.Version, Acked: r.Acked, Rejected: r.Rejected}
		if r.Version == h.Current {
			for _, c := range r.Configs {
				redacted, err := RedactConfig(c)
				if err != nil {
					return publish.History{}, fmt.Errorf("version %s: %w", r.Version, err)
				}
				shown.Configs = append(shown.Configs, redacted)
			}
		}
		out.Revisions = append(out.Revisions, shown)
	}
	for name, w := range h.Withheld {
		if w.Previous != nil {
			redacted, err := RedactConfig(*w.Previous)
			if err != nil {
				return publish.History{}, fmt.Errorf("the content withheld of %s: %w", name, err)
			}
			w.Previous = &redacted
		}
		if out.Withheld == nil {
			out.Withheld = map[string]translate.Withheld{}
		}
		out.Withheld[name] = w
	}
	return out, nil
}

// RedactConfig returns c with the secret material of its resources
// redacted, as translate.Redact redacts a served resource; a resource that
// holds none keeps its JSON as it is. A resource that does not decode is an
// error: what it holds cannot be told.
func RedactConfig(c translate.Config) (translate.Config, error) {
	out := c
	res := &out.Spec.Resources
	for _, k := range resource.Kinds {
		list := k.List(res)
		redacted := make([]runtime.RawExtension, len(*list))
		for i, raw := range *list {
			redacted[i] = raw
			msg, _, err := resource.Decode(k, raw.Raw)
			if err != nil {
				return translate.Config{}, fmt.Errorf("EnvoyConfig %s: spec.resources.%s[%d] does not decode: %w", c.Name, k.Field, i, err)
			}
			r := translate.Redact(msg)
			if proto.Equal(msg, r) {
				continue
			}
			js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r)
			if err != nil {
				return translate.Config{}, fmt.Errorf("EnvoyConfig %s: spec.resources.%s[%d]: %w", c.Name, k.Field, i, err)
			}
			redacted[i] = runtime.RawExtension{Raw: js}
		}
		if len(redacted) > 0 {
			*list = redacted
		}
	}
	return out, nil
}
