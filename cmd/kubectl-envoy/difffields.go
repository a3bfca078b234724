package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strconv"
)

// fieldChange is one field of a resource that differs, at its path in
// Envoy's field names: Old is absent when the field is added, New when it
// is removed.
type fieldChange struct {
	Path string          `json:"path"`
	Old  json.RawMessage `json:"old,omitempty"`
	New  json.RawMessage `json:"new,omitempty"`
}

// diffFields compares two versions of a resource in Envoy's JSON, field by
// field. Objects are compared key by key; lists element by element, by
// index, or by name when every element of both has a distinct "name" and
// the names they share come in the same order (filters, virtual hosts,
// weighted clusters: an element inserted then shows as one addition, not
// as a change of every element after it). A list whose named elements
// were reordered is one change of the whole list, since order matters to
// Envoy (filters run, routes match, in order).
func diffFields(before, after json.RawMessage) []fieldChange {
	a, errA := decodeJSON(before)
	b, errB := decodeJSON(after)
	if errA != nil || errB != nil {
		if bytes.Equal(before, after) {
			return nil
		}
		return []fieldChange{{Path: "", Old: before, New: after}}
	}
	var out []fieldChange
	compareValues("", a, b, &out)
	return out
}

func decodeJSON(b json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // 64-bit integers come as strings, others must not lose digits either
	var v any
	err := dec.Decode(&v)
	return v, err
}

func compareValues(path string, a, b any, out *[]fieldChange) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			compareObjects(path, av, bv, out)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			compareLists(path, av, bv, out)
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fieldChange{Path: path, Old: encodeJSON(a), New: encodeJSON(b)})
	}
}

func compareObjects(path string, a, b map[string]any, out *[]fieldChange) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := fieldPath(path, k)
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case !inA:
			*out = append(*out, fieldChange{Path: p, New: encodeJSON(bv)})
		case !inB:
			*out = append(*out, fieldChange{Path: p, Old: encodeJSON(av)})
		default:
			compareValues(p, av, bv, out)
		}
	}
}

func compareLists(path string, a, b []any, out *[]fieldChange) {
	an, aok := elementNames(a)
	bn, bok := elementNames(b)
	if aok && bok {
		if !sameOrder(an, bn) {
			if !reflect.DeepEqual(a, b) {
				*out = append(*out, fieldChange{Path: path, Old: encodeJSON(a), New: encodeJSON(b)})
			}
			return
		}
		byName := func(l []any, names []string) map[string]any {
			m := make(map[string]any, len(l))
			for i, n := range names {
				m[n] = l[i]
			}
			return m
		}
		am, bm := byName(a, an), byName(b, bn)
		for _, n := range an {
			p := path + "[name=" + n + "]"
			if bv, ok := bm[n]; ok {
				compareValues(p, am[n], bv, out)
			} else {
				*out = append(*out, fieldChange{Path: p, Old: encodeJSON(am[n])})
			}
		}
		for _, n := range bn {
			if _, ok := am[n]; !ok {
				*out = append(*out, fieldChange{Path: path + "[name=" + n + "]", New: encodeJSON(bm[n])})
			}
		}
		return
	}
	for i := 0; i < len(a) || i < len(b); i++ {
		p := path + "[" + strconv.Itoa(i) + "]"
		switch {
		case i >= len(a):
			*out = append(*out, fieldChange{Path: p, New: encodeJSON(b[i])})
		case i >= len(b):
			*out = append(*out, fieldChange{Path: p, Old: encodeJSON(a[i])})
		default:
			compareValues(p, a[i], b[i], out)
		}
	}
}

// elementNames returns the "name" of every element of l, when each is an
// object with a name of its own.
func elementNames(l []any) ([]string, bool) {
	names := make([]string, 0, len(l))
	seen := map[string]bool{}
	for _, e := range l {
		o, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := o["name"].(string)
		if !ok || n == "" || seen[n] {
			return nil, false
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, true
}

// sameOrder reports whether the names a and b share come in the same order.
func sameOrder(a, b []string) bool {
	inB := map[string]bool{}
	for _, n := range b {
		inB[n] = true
	}
	inA := map[string]bool{}
	var common []string
	for _, n := range a {
		inA[n] = true
		if inB[n] {
			common = append(common, n)
		}
	}
	i := 0
	for _, n := range b {
		if inA[n] {
			if common[i] != n {
				return false
			}
			i++
		}
	}
	return true
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// fieldPath is path's field key: .key for a field name, ["key"] for
// anything else (a map key such as a filter's name, or "@type").
func fieldPath(path, key string) string {
	if identifier.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// encodeJSON is v's compact JSON, with <, > and & as they are.
func encodeJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
