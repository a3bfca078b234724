package translate

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// walk visits a map's entries in the order of their keys, every time: what
// is reported from inside maps (typed_per_filter_config, say) reads the
// same from one reconcile to the next.
func TestWalkVisitsMapsInKeyOrder(t *testing.T) {
	k, _ := resource.KindNamed("routes")
	m, _, err := resource.Decode(k, []byte(`{"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "typed_per_filter_config": {`+
		`"e": {"@type": "type.googleapis.com/google.protobuf.Empty"}, "a": {"@type": "type.googleapis.com/google.protobuf.Empty"}, `+
		`"d": {"@type": "type.googleapis.com/google.protobuf.Empty"}, "b": {"@type": "type.googleapis.com/google.protobuf.Empty"}, `+
		`"c": {"@type": "type.googleapis.com/google.protobuf.Empty"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "d", "e"}
	for range 20 {
		var got []string
		walk(m, "", func(msg proto.Message, path string) bool {
			if proto.MessageName(msg) == "google.protobuf.Empty" {
				got = append(got, path[len("virtual_hosts[0].typed_per_filter_config["):len("virtual_hosts[0].typed_per_filter_config[")+1])
			}
			return true
		})
		if !slices.Equal(got, want) {
			t.Fatalf("entries visited in the order %v, want %v", got, want)
		}
	}
}
