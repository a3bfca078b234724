package translate

import (
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// walk calls visit for m and every message inside it, at any depth and
// inside every Any (typed_config and the like), with its field path from m
// ("filter_chains[0].transport_socket.typed_config(DownstreamTlsContext)").
// visit returns whether to look inside the message it was given. An Any
// whose content does not decode is skipped: decoding (xds.Decode) has
// refused such a resource already.
func walk(m proto.Message, path string, visit func(m proto.Message, path string) bool) {
	if a, ok := m.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return
		}
		walk(inner, path+"("+string(proto.MessageName(inner).Name())+")", visit)
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
				walk(l.Get(i).Message().Interface(), name+"["+strconv.Itoa(i)+"]", visit)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message().Interface(), name+"["+k.String()+"]", visit)
					return true
				})
			}
		default:
			walk(v.Message().Interface(), name, visit)
		}
		return true
	})
}
