package xds

import (
	"sort"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"
)

// go-control-plane's snapshot cache marshals a resource again for every
// response that carries it: a state-of-the-world push of 50 endpoints to
// 1000 proxies marshalled the same 50 messages 1000 times, about a sixth of
// the server's CPU for the push. A published resource is marshalled once
// instead, when its fleet is published (its bytes are hashed for the
// version anyway), and handed to the cache as an encodedResource: a message
// that behaves as the resource in every respect but that marshalling it
// copies those bytes.

// encodedResource is a published resource with its wire form. Nothing may
// change the resource once it is encoded; published resources are shared
// and never changed (see Decode).
type encodedResource struct {
	types.Resource
	name string
	wire []byte
}

// GetName gives the cache the resource's name (cachev3.GetResourceName
// knows the names of Envoy's own types only).
func (e *encodedResource) GetName() string { return e.name }

// ProtoReflect is the resource's reflection, but for how it marshals.
func (e *encodedResource) ProtoReflect() protoreflect.Message {
	return encodedMessage{Message: e.Resource.ProtoReflect(), e: e}
}

type encodedMessage struct {
	protoreflect.Message
	e *encodedResource
}

func (m encodedMessage) Interface() protoreflect.ProtoMessage { return m.e }

func (m encodedMessage) ProtoMethods() *protoiface.Methods { return &encodedMethods }

// encodedMethods are protobuf's fast paths for an encodedResource: its size
// and its marshalling are those of its wire form, which was marshalled
// deterministically, whole and valid. Every other operation (equality,
// cloning, JSON) goes through the resource's reflection.
var encodedMethods = protoiface.Methods{
	Flags: protoiface.SupportMarshalDeterministic,
	Size: func(in protoiface.SizeInput) protoiface.SizeOutput {
		return protoiface.SizeOutput{Size: len(in.Message.(encodedMessage).e.wire)}
	},
	Marshal: func(in protoiface.MarshalInput) (protoiface.MarshalOutput, error) {
		return protoiface.MarshalOutput{Buf: append(in.Buf, in.Message.(encodedMessage).e.wire...)}, nil
	},
	CheckInitialized: func(protoiface.CheckInitializedInput) (protoiface.CheckInitializedOutput, error) {
		return protoiface.CheckInitializedOutput{}, nil
	},
}

// plain returns the resource r stands for: itself, or what it encodes.
func plain(r types.Resource) types.Resource {
	if e, ok := r.(*encodedResource); ok {
		return e.Resource
	}
	return r
}

// encodeKind marshals the resources of type typeURL, deterministically and
// in the order of their names, and adds each with its type and name to h:
// the version of their content. It returns them encoded. A resource that
// does not marshal is returned as it is (the cache reports the error when
// it marshals it for a response).
func encodeKind(h *Hash, typeURL string, rs []types.Resource) []types.Resource {
	k := KindOf(typeURL)
	out := make([]types.Resource, len(rs))
	for i, r := range rs {
		out[i] = plain(r)
	}
	sort.Slice(out, func(i, j int) bool { return k.name(out[i]) < k.name(out[j]) })
	for i, r := range out {
		name := k.name(r)
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		h.Add(typeURL, name, b)
		if err == nil {
			out[i] = &encodedResource{Resource: r, name: name, wire: b}
		}
	}
	return out
}
