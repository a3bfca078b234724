package cache

import (
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"google.golang.org/protobuf/types/known/anypb"
)

// A published resource is marshalled once, when its fleet is published (its
// bytes are hashed for the version anyway), into the Any that every response
// carrying it shares, state of the world and delta alike. A response is then
// a list of those Anys: gRPC copies their bytes onto the wire, and nothing
// marshals the resource again, whatever the number of proxies.

// encodedResource is a published resource with its wire form. Nothing may
// change it once it is encoded: every response shares it.
type encodedResource struct {
	name string
	// resource is the resource as published (see Decode: shared, never changed).
	resource types.Resource
	// version is the resource's own version in delta responses: the SHA-256
	// of its wire form, in hex, as go-control-plane's snapshot cache gave
	// it, so that a delta proxy's initial_resource_versions stay valid
	// across an upgrade.
	version string
	// any is the resource as state-of-the-world responses carry it, and
	// delta as delta responses do.
	any   *anypb.Any
	delta *discoveryv3.Resource
}

// typeSnapshot is what a fleet serves of one type: its version and its
// resources, encoded.
type typeSnapshot struct {
	typeURL string
	// version is a hash of the type's content (see NewSnapshot).
	version string
	// sorted holds the resources in the order of their names, and all their
	// Anys in that order: a wildcard state-of-the-world response.
	sorted []*encodedResource
	all    []*anypb.Any
	byName map[string]*encodedResource
}

// encodeKind is resource.MarshalKind that returns the resources encoded, with the
// error of the first one that does not marshal.
func encodeKind(h *resource.Hash, typeURL string, rs []types.Resource) ([]*encodedResource, error) {
	out := make([]*encodedResource, 0, len(rs))
	var first error
	resource.MarshalKind(h, typeURL, rs, func(name string, r types.Resource, b []byte, err error) {
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s %q does not marshal: %w", resource.KindOf(typeURL).Noun, name, err)
			}
			return
		}
		a := &anypb.Any{TypeUrl: typeURL, Value: b}
		v := cachev3.HashResource(b)
		out = append(out, &encodedResource{name: name, resource: r, version: v, any: a,
			delta: &discoveryv3.Resource{Name: name, Version: v, Resource: a}})
	})
	return out, first
}

// newTypeSnapshot encodes the resources of type typeURL; its version is
// the hash h sums them into.
func newTypeSnapshot(typeURL string, rs []types.Resource) (*typeSnapshot, error) {
	h := resource.NewHash()
	encoded, err := encodeKind(h, typeURL, rs)
	t := &typeSnapshot{typeURL: typeURL, version: h.Sum(), sorted: encoded,
		all: make([]*anypb.Any, len(encoded)), byName: make(map[string]*encodedResource, len(encoded))}
	for i, e := range encoded {
		t.all[i] = e.any
		t.byName[e.name] = e
	}
	return t, err
}

// plain returns the published resources.
func (t *typeSnapshot) plain() []types.Resource {
	out := make([]types.Resource, len(t.sorted))
	for i, e := range t.sorted {
		out[i] = e.resource
	}
	return out
}
