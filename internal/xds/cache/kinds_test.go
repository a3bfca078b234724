package cache

import (
	"testing"

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
	if got := endpointsPushed; resource.Kinds[resource.PushOrder[got]].TypeURL != resourcev3.EndpointType {
		t.Errorf("endpointsPushed is %d, not the endpoints' rank", got)
	}
}
