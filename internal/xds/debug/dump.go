package debug

import (
	"encoding/json"
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Dump renders a fleet's resources (by type URL), of every kind or only of
// kind only (a field name, "" for all), in Envoy's JSON with its field
// names, secret material redacted (translate.Redact).
func Dump(fleet, replica string, resources map[string][]types.Resource, only string) (ConfigDump, error) {
	d := ConfigDump{Fleet: fleet, Replica: replica, Resources: map[string][]json.RawMessage{}}
	for _, k := range resource.Kinds {
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
