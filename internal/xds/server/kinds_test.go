package server

import (
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// What the server tells of the types it serves comes from resource.Kinds,
// and says what it said when it was written out.
func TestServedKinds(t *testing.T) {
	if want := "listeners, routes, clusters, endpoints and secrets"; servedFields != want {
		t.Errorf("the types served are told as %q, want %q", servedFields, want)
	}
	for _, k := range resource.Kinds {
		if _, unserved := unservedTypes[k.TypeURL]; unserved {
			t.Errorf("%s are served, and labelled as a type that is not", k.Field)
		}
	}
}
