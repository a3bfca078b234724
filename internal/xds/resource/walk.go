package resource

import (
	"sort"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Walk calls visit for m and every message inside it, at any depth and
// inside every Any (typed_config and the like), with its field path from m
// ("filter_chains[0].transport_socket.typed_config(DownstreamTlsContext)"):
// a message before what is inside it, and a map's entries in the order of
// their keys. The order of a message's fields is protobuf's Range order,
// the same throughout a run of a binary but not from one build to the next.
// visit returns whether to look inside the message it was given. An Any
// whose content does not decode is skipped: decoding (Decode) refuses such a
// resource.
func Walk(m proto.Message, path string, visit func(m proto.Message, path string) bool) {
	walkAny(m, path, visit, false)
}

// WalkRewriting is Walk for a visit that changes the messages it is given:
// the content of every Any is written back into it.
func WalkRewriting(m proto.Message, path string, visit func(m proto.Message, path string) bool) {
	walkAny(m, path, visit, true)
}

func walkAny(m proto.Message, path string, visit func(m proto.Message, path string) bool, rewrite bool) {
	if a, ok := m.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return
		}
		walkAny(inner, path+"("+string(proto.MessageName(inner).Name())+")", visit, rewrite)
		if rewrite {
			_ = a.MarshalFrom(inner) // it was just unmarshalled: it marshals
		}
		return
	}
	if !visit(m, path) {
		return
	}
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		name := string(fd.Name())
		if path != "" {
			name = path + "." + name
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walkAny(l.Get(i).Message().Interface(), name+"["+strconv.Itoa(i)+"]", visit, rewrite)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				// In the order of the keys: what visit reports comes out the
				// same every time.
				m := v.Map()
				keys := make([]protoreflect.MapKey, 0, m.Len())
				m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
					keys = append(keys, k)
					return true
				})
				sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
				for _, k := range keys {
					walkAny(m.Get(k).Message().Interface(), name+"["+k.String()+"]", visit, rewrite)
				}
			}
		default:
			walkAny(v.Message().Interface(), name, visit, rewrite)
		}
		return true
	})
}
