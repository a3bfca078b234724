package xdstest

import (
	"slices"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Envoy subscribes to clusters and listeners, then to what they name, as
// it always has; a new kind takes its place from its entry of Kinds.
func TestEnvoyOrder(t *testing.T) {
	want := []string{resourcev3.ClusterType, resourcev3.ListenerType, resourcev3.EndpointType, resourcev3.RouteType, resourcev3.SecretType}
	if !slices.Equal(EnvoyOrder, want) || wildcards != 2 {
		t.Errorf("EnvoyOrder is %v, %d of them wildcards; want %v, 2", EnvoyOrder, wildcards, want)
	}
	for _, wildcard := range []bool{false, true} {
		layers := resource.Kind{TypeURL: resourcev3.RuntimeType, Rank: len(resource.Kinds), Wildcard: wildcard}
		kinds := append(slices.Clone(resource.Kinds[:]), layers)
		order, n := envoyOrder(kinds, append(slices.Clone(resource.PushOrder), len(resource.Kinds)))
		at := slices.Index(order, resourcev3.RuntimeType)
		switch {
		case wildcard && (n != 3 || at != 2):
			t.Errorf("a new kind held whole: %v, %d wildcards", order, n)
		case !wildcard && (n != 2 || at != len(order)-1):
			t.Errorf("a new kind asked for by name: %v, %d wildcards", order, n)
		}
	}
}
