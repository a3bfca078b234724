package cache

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// What the cache tells of the types served by name only, and the rank it
// waits for, come from resource.Kinds.
func TestServedByNameKinds(t *testing.T) {
	var byName []string
	for _, k := range resource.Kinds {
		if k.ByName {
			byName = append(byName, k.Field)
		}
	}
	if len(byName) != 1 || byName[0] != "secrets" {
		t.Errorf("the types served by name only are %v, want secrets", byName)
	}
	err := status.Convert(wildcardRefused(resource.KindOf(resourcev3.SecretType)))
	if want := "secrets are served by name only, not to a wildcard subscription"; err.Code() != codes.InvalidArgument || err.Message() != want {
		t.Errorf("a wildcard of secrets is refused with %v %q, want %q", err.Code(), err.Message(), want)
	}
	for kind, at := range pushed {
		if resource.PushOrder[at] != kind {
			t.Errorf("%s are pushed %d-th, not as resource.PushOrder says", resource.Kinds[kind].Field, at)
		}
	}
}

// What a publication's streams wait for to be warm comes from the
// references that warm (resource.Reference.Warming): an EDS cluster's
// endpoints, by its EDS service name or its own, when the publication
// holds them.
func TestWarmingFromReferences(t *testing.T) {
	eds := func(name, service string) *clusterv3.Cluster {
		return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: service}}
	}
	p, err := NewSnapshot("v", map[string][]types.Resource{
		resourcev3.ClusterType: {eds("a", ""), eds("b", "b-endpoints"), eds("c", ""),
			&clusterv3.Cluster{Name: "d", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}},
		resourcev3.EndpointType: {&endpointv3.ClusterLoadAssignment{ClusterName: "a"},
			&endpointv3.ClusterLoadAssignment{ClusterName: "b-endpoints"}, &endpointv3.ClusterLoadAssignment{ClusterName: "d"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, e := kindIndex(resourcev3.ClusterType), kindIndex(resourcev3.EndpointType)
	want := []warming{{c, "a", e, "a"}, {c, "b", e, "b-endpoints"}}
	if !slices.Equal(p.warming, want) {
		t.Errorf("the publication warms %v, want %v", p.warming, want)
	}
}
