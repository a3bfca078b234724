// Package objects is how every controller reconciles its children: Child
// compares the object a controller wants with the one it finds and puts its
// fields back (Ensure, the only place that writes a child), Children records
// what one reconcile wrote and found, and DeleteRenamed removes what a
// renamed child left behind. The comparison helpers (Contains, MergeMaps) are
// pure; Ensure and DeleteRenamed do the I/O.
package objects

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// Contains reports whether actual holds every field that desired sets, with
// desired's value. Both sides are compared in the JSON form the API server
// receives and stores, so a field desired sets is one its JSON keeps: a
// pointer that is not nil, a struct, or a value the encoding does not omit.
// Zero values count like any other: replicas 0, a false
// automountServiceAccountToken, an empty string in a field without
// omitempty all have to be found in actual. What desired leaves out is not
// compared, so values the API server defaults and fields other actors add
// are no difference: nil pointers, nil maps and lists, and the Go zero value
// of a field marked omitempty, which the encoding drops and the API server
// cannot tell from unset (a renderer that means to enforce such a zero sets
// a pointer field, or leaves the field to others).
//
// Maps are compared key by key: keys that others added (labels,
// annotations) are not differences. A map desired holds, even an empty one
// (a struct such as emptyDir: {}), must be in actual. Lists must have the
// same length and match item by item, each item compared as a partial
// object in turn: the defaults the API server adds inside items (a
// container's terminationMessagePath, a port's protocol) are not
// differences, an added, removed or reordered item is. An empty list and an
// absent one are alike, as they are once stored.
//
// desired and actual are typed API objects or parts of them (a PodSpec, a map).
func Contains(actual, desired any) (bool, error) {
	a, err := toUnstructured(actual)
	if err != nil {
		return false, fmt.Errorf("converting actual: %w", err)
	}
	d, err := toUnstructured(desired)
	if err != nil {
		return false, fmt.Errorf("converting desired: %w", err)
	}
	return containsValue(a, d), nil
}

// toUnstructured turns a typed value into the JSON-like form the API server
// stores (maps, slices, strings, int64, float64, bool), so that both sides are
// compared the way they serialise.
func toUnstructured(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
	case reflect.Map, reflect.Slice:
		// A map or a list compared on its own (labels) sets nothing when
		// empty, as an omitempty field of one would.
		if rv.Len() == 0 {
			return nil, nil
		}
	}
	// The converter handles structs; wrap everything else in one.
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		V any `json:"v"`
	}{V: v})
	if err != nil {
		return nil, err
	}
	return u["v"], nil
}

func containsValue(actual, desired any) bool {
	switch d := desired.(type) {
	case nil:
		return true // not set: left to others
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			return false
		}
		for k, dv := range d {
			if !containsValue(a[k], dv) {
				return false
			}
		}
		return true
	case []any:
		a, _ := actual.([]any)
		if len(a) != len(d) {
			return false
		}
		for i := range d {
			if !containsValue(a[i], d[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(normalizeNumber(actual), normalizeNumber(desired))
	}
}

// normalizeNumber makes 3 and 3.0 equal: the converter gives integers as
// int64 and other numbers as float64.
func normalizeNumber(v any) any {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v
}

// MergeMaps returns base with every key of overlay set to overlay's value. It
// never modifies base. It returns nil only when both are empty.
func MergeMaps(base, overlay map[string]string) map[string]string {
	if len(base) == 0 && len(overlay) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(overlay))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range overlay {
		out[k] = v
	}
	return out
}
