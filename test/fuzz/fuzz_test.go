package fuzz

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/crdschema"
)

var schemas sync.Map // kind -> *crdschema.Schema

func schema(t *testing.T, kind string) *crdschema.Schema {
	if s, ok := schemas.Load(kind); ok {
		return s.(*crdschema.Schema)
	}
	s, err := crdschema.LoadFromRoot(kind)
	if err != nil {
		t.Fatal(err)
	}
	schemas.Store(kind, s)
	return s
}

// decode reads spec, arbitrary bytes, as the JSON of a spec into out; false
// when it is not one.
func decode(spec []byte, out any) bool {
	return json.Unmarshal(spec, out) == nil
}

// admitted reports whether the API server would store obj, a typed object of
// kind; when it would, obj has the CRD's defaults, as the controller sees it.
func admitted(t *testing.T, kind string, obj any) bool {
	t.Helper()
	errs, err := schema(t, kind).AdmitObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(errs) == 0
}

// valid fails the test when what the operator rendered is invalid.
func valid(t *testing.T, what string, errs field.ErrorList, obj any) {
	t.Helper()
	if len(errs) > 0 {
		b, _ := json.Marshal(obj)
		t.Fatalf("%s is invalid: %v\n%s", what, errs.ToAggregate(), b)
	}
}

var long = strings.Repeat
