// Package manifests compares sets of Kubernetes objects written as YAML
// streams as the API server tells them apart: each object by its apiVersion,
// kind, namespace and name, and its content parsed, not as text, so that the
// order of objects and of keys, comments and quoting make no difference.
package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Key names an object.
type Key struct{ APIVersion, Kind, Namespace, Name string }

func (k Key) String() string {
	if k.Namespace == "" {
		return fmt.Sprintf("%s %s (%s)", k.Kind, k.Name, k.APIVersion)
	}
	return fmt.Sprintf("%s %s/%s (%s)", k.Kind, k.Namespace, k.Name, k.APIVersion)
}

// Objects are objects by their keys.
type Objects map[Key]map[string]any

// Parse parses a stream of YAML documents; empty documents (comments only,
// say) are skipped, and two objects with one key are an error.
func Parse(b []byte) (Objects, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	objs := Objects{}
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		k := Key{APIVersion: str(obj["apiVersion"]), Kind: str(obj["kind"]), Namespace: str(meta["namespace"]), Name: str(meta["name"])}
		if k.Kind == "" || k.Name == "" {
			return nil, fmt.Errorf("an object without kind or name: %v", obj)
		}
		if _, dup := objs[k]; dup {
			return nil, fmt.Errorf("%s twice", k)
		}
		objs[k] = obj
	}
}

func str(v any) string { s, _ := v.(string); return s }

// Diff returns what tells got from want, sorted: the objects only one of
// them holds, and the fields that differ in the objects both hold, at most
// maxFields per object. None when they hold the same objects.
func Diff(want, got Objects) []string {
	const maxFields = 5
	var out []string
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			out = append(out, "missing: "+k.String())
			continue
		}
		var fields []string
		diffValue(k.String()+": ", "", w, g, &fields)
		if len(fields) > maxFields {
			fields = append(fields[:maxFields], fmt.Sprintf("%s: and %d more fields", k, len(fields)-maxFields))
		}
		out = append(out, fields...)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "unexpected: "+k.String())
		}
	}
	sort.Strings(out)
	return out
}

// diffValue appends to out each path below path where want and got differ.
func diffValue(prefix, path string, want, got any, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		for k := range keys {
			wv, inW := w[k]
			gv, inG := g[k]
			switch {
			case !inW:
				*out = append(*out, fmt.Sprintf("%s%s.%s: unexpected %s", prefix, path, k, show(gv)))
			case !inG:
				*out = append(*out, fmt.Sprintf("%s%s.%s: missing, want %s", prefix, path, k, show(wv)))
			default:
				diffValue(prefix, path+"."+k, wv, gv, out)
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		for i := range w {
			diffValue(prefix, fmt.Sprintf("%s[%d]", path, i), w[i], g[i], out)
		}
		return
	}
	if !reflect.DeepEqual(want, got) {
		*out = append(*out, fmt.Sprintf("%s%s: %s, want %s", prefix, path, show(got), show(want)))
	}
}

// show prints a value, a string quoted.
func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}
