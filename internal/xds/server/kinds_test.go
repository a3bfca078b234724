package server

import (
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// What the server tells of the types it serves comes from resource.Kinds,
// and says what it said when it was written out.
func TestServedKinds(t *testing.T) {
	for _, k := range resource.Kinds {
		if err := servedType(k.TypeURL); err != nil {
			t.Errorf("%s: %v", k.Field, err)
		}
	}
	err := status.Convert(servedType("type.googleapis.com/envoy.config.core.v3.Node"))
	if want := `type "type.googleapis.com/envoy.config.core.v3.Node" is not served: only listeners, routes, clusters, endpoints and secrets are`; err.Code() != codes.InvalidArgument || err.Message() != want {
		t.Errorf("an unknown type is refused with %v %q, want %q", err.Code(), err.Message(), want)
	}
	var byName []string
	for _, k := range resource.Kinds {
		if k.ByName {
			byName = append(byName, k.Field)
		}
	}
	if len(byName) != 1 || byName[0] != "secrets" {
		t.Errorf("the types served by name only are %v, want secrets", byName)
	}
	err = status.Convert(wildcardRefused(resource.KindOf(resourcev3.SecretType)))
	if want := "secrets are served by name only, not to a wildcard subscription"; err.Code() != codes.InvalidArgument || err.Message() != want {
		t.Errorf("a wildcard of secrets is refused with %v %q, want %q", err.Code(), err.Message(), want)
	}
	if got := endpointsPushed; resource.Kinds[resource.PushOrder[got]].TypeURL != resourcev3.EndpointType {
		t.Errorf("endpointsPushed is %d, not the endpoints' rank", got)
	}
}
