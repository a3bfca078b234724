package resource

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// maxNesting is how deep Envoy's protobuf parser takes messages nested in
// one another: a message more than 100 levels below the top of what it
// parses, a resource or the content of an Any (each typed_config is parsed
// on its own), it refuses ("Unable to unpack as x"). A map's entry is a
// level of its own. Go's parser takes 10000, so a resource admission
// decodes may be one Envoy cannot.
const maxNesting = 100

// checkNesting: no message of m, nor of any Any in it, is nested deeper
// than maxNesting below the top of its parse.
func checkNesting(f *findings, m proto.Message) {
	path, ok := tooDeep(m.ProtoReflect(), "", 0)
	if !ok {
		return
	}
	// Name the resource or the typed_config, and the start of the way down.
	top, down := "", path
	if i := strings.LastIndex(path, ")."); i >= 0 {
		top, down = path[:i+1], path[i+2:]
	}
	if len(down) > 80 {
		down = down[:80] + "..."
	}
	f.add(top, "its messages nest more than %d deep (%s), which Envoy's protobuf parser refuses", maxNesting, down)
}

// tooDeep returns the path of the first message of m, itself at depth,
// that lies deeper than maxNesting.
func tooDeep(m protoreflect.Message, path string, depth int) (string, bool) {
	if depth > maxNesting {
		return path, true
	}
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return "", false
		}
		return tooDeep(inner.ProtoReflect(), path+"("+string(inner.ProtoReflect().Descriptor().Name())+")", 0)
	}
	var found string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := child(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				if depth+1 > maxNesting {
					found = name
				}
				return found == ""
			}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if p, deep := tooDeep(mv.Message(), name+"["+k.String()+"]", depth+2); deep {
					found = p
				}
				return found == ""
			})
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && found == ""; i++ {
				if p, deep := tooDeep(l.Get(i).Message(), name+"["+strconv.Itoa(i)+"]", depth+1); deep {
					found = p
				}
			}
		default:
			if p, deep := tooDeep(v.Message(), name, depth+1); deep {
				found = p
			}
		}
		return found == ""
	})
	return found, found != ""
}
