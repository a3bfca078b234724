package resource

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// rawList is the type of a list of spec.resources.
var rawList = reflect.TypeOf([]runtime.RawExtension(nil))

// apiLists returns the lists of api, a struct, by their JSON names.
func apiLists(api reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(api) {
		if f.Anonymous || f.Type != rawList {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = f
	}
	return out
}

// checkKinds returns what kinds lack, each kind's lists being a field of
// api: every fact of every kind, distinct where two kinds must differ, and
// ranks from 0 with none left out.
func checkKinds(kinds []Kind, api reflect.Type) []string {
	var problems []string
	fail := func(i int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("Kinds[%d] (%s): ", i, kinds[i].Field)+fmt.Sprintf(format, args...))
	}
	lists := apiLists(api)
	seen := map[string]int{}
	for i, k := range kinds {
		for fact, v := range map[string]string{"Field": k.Field, "TypeURL": k.TypeURL, "Noun": k.Noun, "Short": k.Short} {
			if v == "" {
				fail(i, "no %s", fact)
				continue
			}
			if j, dup := seen[fact+"="+v]; dup {
				fail(i, "%s %q is also that of Kinds[%d]", fact, v, j)
			}
			seen[fact+"="+v] = i
		}
		if k.Rank < 0 || k.Rank >= len(kinds) {
			fail(i, "Rank %d: want 0 to %d, the kinds' place in the push order", k.Rank, len(kinds)-1)
		} else if j, dup := seen[fmt.Sprint("Rank=", k.Rank)]; dup {
			fail(i, "Rank %d is also that of Kinds[%d]", k.Rank, j)
		}
		seen[fmt.Sprint("Rank=", k.Rank)] = i
		if k.Field != "" {
			if _, ok := lists[k.Field]; !ok {
				fail(i, "%s has no field with JSON name %q, a list of raw resources", api, k.Field)
			}
		}
		if k.List == nil {
			fail(i, "no List")
		}
		if k.name == nil {
			fail(i, "no name")
		}
		if k.check == nil {
			fail(i, "no check (Envoy's load-time rules of the kind; a func that finds nothing when there are none)")
		}
		if k.refs == nil {
			fail(i, "no refs (the names it gives of other resources; noReferences when none)")
		}
		if k.FleetCeiling <= 0 {
			fail(i, "FleetCeiling %d: want how many a fleet holds at most", k.FleetCeiling)
		}
		if err := bootstrapList(k.Static); err != nil {
			fail(i, "Static %q: %v", k.Static, err)
		}
		if k.ByName && k.Wildcard {
			fail(i, "both ByName and Wildcard")
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(k.TypeURL)
		if k.TypeURL != "" && err != nil {
			fail(i, "TypeURL %q is not a registered message: %v", k.TypeURL, err)
		}
		switch {
		case k.newMsg == nil:
			fail(i, "no newMsg")
		case mt != nil && k.newMsg().ProtoReflect().Descriptor().FullName() != mt.Descriptor().FullName():
			fail(i, "newMsg makes a %s, not the %s of its TypeURL", k.newMsg().ProtoReflect().Descriptor().FullName(), mt.Descriptor().FullName())
		}
	}
	for field := range lists {
		if !slices.ContainsFunc(kinds, func(k Kind) bool { return k.Field == field }) {
			problems = append(problems, fmt.Sprintf("%s.%s (%q) has no entry in Kinds", api, lists[field].Name, field))
		}
	}
	slices.Sort(problems)
	return problems
}

// bootstrapList returns an error when path (a.b.c, by JSON names with
// Envoy's field names) is not a list of messages of Envoy's bootstrap.
func bootstrapList(path string) error {
	if path == "" {
		return errors.New("no path")
	}
	md := (&bootstrapv3.Bootstrap{}).ProtoReflect().Descriptor()
	parts := strings.Split(path, ".")
	for i, part := range parts {
		fd := md.Fields().ByName(protoreflect.Name(part))
		switch {
		case fd == nil:
			return fmt.Errorf("%s has no field %s", md.FullName(), part)
		case fd.Message() == nil || fd.IsMap():
			return fmt.Errorf("%s is not a message or a list of messages", fd.FullName())
		case i < len(parts)-1 && fd.IsList():
			return fmt.Errorf("%s is a list, with more path after it", fd.FullName())
		case i == len(parts)-1 && !fd.IsList():
			return fmt.Errorf("%s is not a list", fd.FullName())
		}
		md = fd.Message()
	}
	return nil
}

// Every kind has every fact, and every list of spec.resources is a kind.
func TestKinds(t *testing.T) {
	for _, p := range checkKinds(Kinds[:], reflect.TypeOf(examplev1.EnvoyResources{})) {
		t.Error(p)
	}
	// List reads the field Field: fill each field with its own name.
	var res examplev1.EnvoyResources
	for name, f := range apiLists(reflect.TypeOf(res)) {
		reflect.ValueOf(&res).Elem().FieldByIndex(f.Index).Set(reflect.ValueOf([]runtime.RawExtension{{Raw: []byte(name)}}))
	}
	for _, k := range Kinds {
		if k.List == nil {
			continue
		}
		if l := *k.List(&res); len(l) != 1 || string(l[0].Raw) != k.Field {
			t.Errorf("%s: List reads %v, not the field %q", k.Field, l, k.Field)
		}
	}
	// The order of a push is the one the server has always used.
	var order []string
	for _, i := range PushOrder {
		order = append(order, Kinds[i].Short)
	}
	if want := []string{"CDS", "EDS", "LDS", "RDS", "SDS"}; !slices.Equal(order, want) {
		t.Errorf("PushOrder is %v, want %v", order, want)
	}
}

// apiWithRuntimes is examplev1.EnvoyResources with the field a new type
// adds, as TestANewKind has it.
type apiWithRuntimes struct {
	examplev1.EnvoyResources `json:",inline"`
	Runtimes                 []runtime.RawExtension `json:"runtimes,omitempty"`
}

// runtimeLayer is the kind a new type of resource, RTDS's runtime layers,
// would be, its list being runtimes: what TestANewKind adds.
func runtimeLayer(runtimes *[]runtime.RawExtension) Kind {
	return Kind{
		Field: "runtimes", TypeURL: resourcev3.RuntimeType, Noun: "runtime layer", Short: "RTDS", Rank: len(Kinds),
		FleetCeiling: 100, Static: "layered_runtime.layers",
		AsStatic: func(res map[string]any, _ int) map[string]any {
			return map[string]any{"name": res["name"], "static_layer": res["layer"]}
		},
		List:   func(*examplev1.EnvoyResources) *[]runtime.RawExtension { return runtimes },
		newMsg: func() types.Resource { return &runtimev3.Runtime{} },
		name:   func(r types.Resource) string { return r.(*runtimev3.Runtime).GetName() },
		check:  func(*findings, types.Resource) {},
		refs:   noReferences,
	}
}

// A new type of resource, say RTDS's runtime layers, is one field of
// examplev1.EnvoyResources and one entry of Kinds: what the entry says is
// all that reading EnvoyConfigs, Envoy's load-time rules, references, the
// fleet's bounds, the policy, the load check in a real Envoy
// (envoyload), the push order, the server, kubectl envoy, the stand-in
// proxies and the tests' Envoy-like clients know of a type. checkKinds
// (TestKinds) refuses the entry without any one of its facts. The tests
// of envoyload and xdstest add such a kind too, and find it where it goes.
func TestANewKind(t *testing.T) {
	var runtimes []runtime.RawExtension
	layer := runtimeLayer(&runtimes)
	api := reflect.TypeOf(apiWithRuntimes{})
	kinds := append(slices.Clone(Kinds[:]), layer)
	if p := checkKinds(kinds, api); len(p) > 0 {
		t.Fatalf("the new kind lacks facts: %v", p)
	}
	if order := pushOrder(kinds); order[len(order)-1] != len(Kinds) {
		t.Errorf("the push order is %v, want the new kind last", order)
	}

	// Without the field of the API, or without the entry, a test fails.
	if p := checkKinds(kinds, reflect.TypeOf(examplev1.EnvoyResources{})); len(p) != 1 {
		t.Errorf("a kind without its field of the API: %v", p)
	}
	if p := checkKinds(Kinds[:], api); len(p) != 1 {
		t.Errorf("a field of the API without its kind: %v", p)
	}
	// So does an entry without any one of its facts, or with a wrong one.
	for fact, drop := range map[string]func(*Kind){
		"Field":               func(k *Kind) { k.Field = "" },
		"TypeURL":             func(k *Kind) { k.TypeURL = "" },
		"Noun":                func(k *Kind) { k.Noun = "" },
		"Short":               func(k *Kind) { k.Short = "" },
		"Rank":                func(k *Kind) { k.Rank = 0 },
		"FleetCeiling":        func(k *Kind) { k.FleetCeiling = 0 },
		"Static":              func(k *Kind) { k.Static = "" },
		"Static (wrong)":      func(k *Kind) { k.Static = "layered_runtime" },
		"ByName and Wildcard": func(k *Kind) { k.ByName, k.Wildcard = true, true },
		"List":                func(k *Kind) { k.List = nil },
		"newMsg":              func(k *Kind) { k.newMsg = nil },
		"name":                func(k *Kind) { k.name = nil },
		"check":               func(k *Kind) { k.check = nil },
		"refs":                func(k *Kind) { k.refs = nil },
	} {
		lacking := layer
		drop(&lacking)
		if p := checkKinds(append(slices.Clone(Kinds[:]), lacking), api); len(p) == 0 {
			t.Errorf("a kind without its %s passes", fact)
		}
	}
}
