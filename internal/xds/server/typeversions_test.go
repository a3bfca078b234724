package server

import (
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Each type is served at the version of its content (resource.Version,
// whose values are pinned across releases): a proxy that moves from a
// replica of one release to one of another is not sent its configuration
// again.
func TestTypesAreServedAtTheirContentVersion(t *testing.T) {
	byType := baseFleet(1)
	s, _ := startServer(t)
	mustPublish(t, s, "v1", byType)
	for _, k := range resource.Kinds {
		want := resource.Version(map[string][]types.Resource{k.TypeURL: byType[k.TypeURL]})
		if got := s.TypeVersion(fleet, k.TypeURL); got != want {
			t.Errorf("%s are served at version %s, want %s", k.Field, got, want)
		}
	}
}
