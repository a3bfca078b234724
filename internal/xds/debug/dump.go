package debug

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// KindNamed returns the kind whose field is name (listeners, routes,
// clusters, endpoints or secrets).
func KindNamed(name string) (xds.Kind, error) {
	var names []string
	for _, k := range xds.Kinds {
		if k.Field == name {
			return k, nil
		}
		names = append(names, k.Field)
	}
	return xds.Kind{}, fmt.Errorf("unknown type %q: want one of %s", name, strings.Join(names, ", "))
}

// Dump renders a fleet's resources (by type URL), of every kind or only of
// kind only (a field name, "" for all), in Envoy's JSON with its field
// names, secret material redacted (translate.Redact).
func Dump(fleet, replica string, resources map[string][]types.Resource, only string) (ConfigDump, error) {
	d := ConfigDump{Fleet: fleet, Replica: replica, Resources: map[string][]json.RawMessage{}}
	for _, k := range xds.Kinds {
		if only != "" && k.Field != only {
			continue
		}
		items := []json.RawMessage{}
		for _, r := range resources[k.TypeURL] {
			js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(translate.Redact(r))
			if err != nil {
				return ConfigDump{}, fmt.Errorf("%s: %w", k.Field, err)
			}
			items = append(items, js)
		}
		d.Resources[k.Field] = items
	}
	return d, nil
}
