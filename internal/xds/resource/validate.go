package resource

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// validateNested applies Envoy's validation rules inside every Any of m
// (typed_config and the like), at any depth: ValidateAll stops at an Any,
// whose content it cannot see. path names m's position for messages.
func validateNested(m protoreflect.Message, path string) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if v, ok := inner.(validator); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		return validateNested(inner.ProtoReflect(), path+"("+string(proto.MessageName(inner).Name())+")")
	}
	var first error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		name := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && first == nil; i++ {
				first = validateNested(l.Get(i).Message(), name+"["+strconv.Itoa(i)+"]")
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					first = validateNested(mv.Message(), name+"["+k.String()+"]")
					return first == nil
				})
			}
		default:
			first = validateNested(v.Message(), name)
		}
		return first == nil
	})
	return first
}

var protojsonPosition = regexp.MustCompile(`\(line (\d+):(\d+)\)`)

// explainDecodeError adds the field at which protojson stopped to its error,
// which gives only a position in the JSON.
func explainDecodeError(err error, js []byte) error {
	m := protojsonPosition.FindStringSubmatch(err.Error())
	if m == nil || m[1] != "1" || strings.Contains(err.Error(), "unknown field") {
		// protojson names an unknown field itself.
		return err
	}
	col, _ := strconv.Atoi(m[2])
	if col < 1 || col > len(js)+1 {
		return err
	}
	// The key closest before the position is the field being read.
	before := string(js[:col-1])
	i := strings.LastIndex(before, `":`)
	if i < 0 {
		return err
	}
	j := strings.LastIndex(before[:i], `"`)
	if j < 0 {
		return err
	}
	return fmt.Errorf("field %q: %w", before[j+1:i], err)
}
