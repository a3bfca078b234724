package inject

import (
	"encoding/json"
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// The webhook may be called again for a pod it has injected (the API server
// reinvokes it when a later webhook changed the pod). By then the API server
// has defaulted the sidecar's container, and its service account admission
// may have mounted the token into it. Whether the pod already has a sidecar
// is therefore decided by its content, allowing only what Kubernetes itself
// adds on the way, and never from the pod's annotations, which the pod's
// author writes.

// containerAdditions are the fields of a container that the API server may
// set on a sidecar it did not set itself: the defaults of imagePullPolicy
// and the termination message, a LimitRange's resources, and volume mounts
// (the service account token). Every other field must be as the sidecar
// defines it.
var containerAdditions = map[string]bool{
	"imagePullPolicy":          true,
	"terminationMessagePath":   true,
	"terminationMessagePolicy": true,
	"resources":                true,
	"volumeMounts":             true,
}

// CarriesContainer reports whether have is want, as the API server may have
// stored it: every field want sets has its value in have (objects within it
// may have gained defaulted fields, lists keep their length and order),
// want's volume mounts are among have's, and have sets no other field than
// containerAdditions.
func CarriesContainer(have, want corev1.Container) bool {
	h, w := asMap(have), asMap(want)
	if h == nil || w == nil {
		return false
	}
	for k := range h {
		if _, ok := w[k]; !ok && !containerAdditions[k] {
			return false
		}
	}
	for k, wv := range w {
		hv, ok := h[k]
		if !ok {
			return false
		}
		if k == "volumeMounts" {
			if !containsEach(hv, wv) {
				return false
			}
			continue
		}
		if !extends(hv, wv) {
			return false
		}
	}
	return true
}

// CarriesVolume reports whether have is want, as the API server may have
// stored it: want's fields, with defaults (a ConfigMap's defaultMode) added.
func CarriesVolume(have, want corev1.Volume) bool {
	h, w := asMap(have), asMap(want)
	return h != nil && w != nil && extends(h, w)
}

// asMap is v in its JSON form, as a generic map, or nil.
func asMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// extends reports whether have is want with, at most, fields added to the
// objects in it.
func extends(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !extends(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !extends(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(have, want)
	}
}

// containsEach reports whether every item of the list want is extended by
// an item of the list have.
func containsEach(have, want any) bool {
	h, ok1 := have.([]any)
	w, ok2 := want.([]any)
	if !ok1 || !ok2 {
		return false
	}
	for _, wi := range w {
		found := false
		for _, hi := range h {
			if extends(hi, wi) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
