package resource

import (
	"fmt"

	"github.com/envoyproxy/go-control-plane/envoy/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Envoy refuses a field or enum value its protos mark disallowed by
// default (envoy.annotations.disallowed_by_default and
// disallowed_by_default_enum): set, or an unset enum field whose default
// value is one ("Using the default now-deprecated value
// DEPRECATED_AND_UNAVAILABLE_DO_NOT_USE for enum 'x'"). Only a runtime
// override, which the fleet's bootstrap does not set, lets them through.
func checkDeprecated(f *findings, m proto.Message) {
	Walk(m, "", func(m proto.Message, path string) bool {
		pm := m.ProtoReflect()
		fields := pm.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			set := pm.Has(fd)
			if set && proto.GetExtension(fd.Options(), annotations.E_DisallowedByDefault).(bool) {
				f.add(child(path, string(fd.Name())), "is deprecated, and Envoy refuses it")
			}
			if fd.Kind() != protoreflect.EnumKind || fd.IsMap() || !set && fd.ContainingOneof() != nil {
				continue
			}
			var values []protoreflect.EnumNumber
			if fd.IsList() {
				for j := range pm.Get(fd).List().Len() {
					values = append(values, pm.Get(fd).List().Get(j).Enum())
				}
			} else {
				values = append(values, pm.Get(fd).Enum())
			}
			for _, v := range values {
				vd := fd.Enum().Values().ByNumber(v)
				if vd == nil || !proto.GetExtension(vd.Options(), annotations.E_DisallowedByDefaultEnum).(bool) {
					continue
				}
				what := "is deprecated"
				if !set {
					what = fmt.Sprintf("defaults to %s, which is deprecated: set it", vd.Name())
				} else {
					what = fmt.Sprintf("%s %s", vd.Name(), what)
				}
				f.add(child(path, string(fd.Name())), "%s, and Envoy refuses it", what)
			}
		}
		return true
	})
}
