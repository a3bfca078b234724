package crdschema

import (
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

func load(t *testing.T, kind string) *Schema {
	t.Helper()
	s, err := LoadFromRoot(kind)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func object(t *testing.T, manifest string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	u := map[string]any{}
	if err := utiljson.Unmarshal(js, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// The checks are the API server's: a few manifests of the integration
// tests' table (test/integration), refused or admitted alike.
func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name, kind, manifest string
		// field is the field the error names; empty when it is admitted.
		field string
	}{
		{"port without targetPort", "Envoy", "metadata: {name: e}\nspec:\n  ports: [{name: http, port: 8080}]", ""},
		{"reserved port", "Envoy", "metadata: {name: e}\nspec:\n  ports: [{name: http, port: 19000}]", "spec.ports"},
		{"label value too long", "Envoy", "metadata: {name: e}\nspec:\n  podLabels: {a: " + strings.Repeat("v", 64) + "}", "spec.podLabels.a"},
		{"label key invalid", "Envoy", "metadata: {name: e}\nspec:\n  podLabels: {'a b': x}", "spec.podLabels"},
		{"requests above limits", "Envoy", "metadata: {name: e}\nspec:\n  resources: {requests: {cpu: 2}, limits: {cpu: 1}}", "spec.resources"},
		{"name with a dot", "Envoy", "metadata: {name: e.x}", "metadata.name"},
		{"name not a subdomain", "Envoy", "metadata: {name: E}", "metadata.name"},
		{"watcher name of 64", "Watcher", "metadata: {name: " + strings.Repeat("w", 64) + "}\nspec: {container: {name: c, image: i}}", "metadata.name"},
		{"watcher operator", "Watcher", "metadata: {name: w}\nspec:\n  container: {name: c, image: i}\n  selector: {matchExpressions: [{key: a, operator: Bogus}]}", "spec.selector.matchExpressions"},
		{"watcher", "Watcher", "metadata: {name: w}\nspec:\n  container: {name: c, image: i}\n  selector: {matchExpressions: [{key: a, operator: Exists}]}", ""},
		{"podset of none", "PodSet", "metadata: {name: p}\nspec: {replicas: 0}", ""},
		{"podset duplicate containers", "PodSet", "metadata: {name: p}\nspec: {template: {spec: {containers: [{name: a}, {name: a}]}}}", "spec.template.spec.containers[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := load(t, tc.kind).Admit(object(t, tc.manifest))
			switch {
			case tc.field == "" && len(errs) > 0:
				t.Fatalf("refused: %v", errs)
			case tc.field != "" && len(errs) == 0:
				t.Fatalf("admitted; want %s refused", tc.field)
			case tc.field != "" && !strings.Contains(errs.ToAggregate().Error(), tc.field):
				t.Fatalf("the errors do not name %s: %v", tc.field, errs)
			}
		})
	}
}

// AdmitObject applies the CRD's defaults to a typed object.
func TestAdmitObjectDefaults(t *testing.T) {
	e := &examplev1.Envoy{}
	e.Name = "edge"
	errs, err := load(t, "Envoy").AdmitObject(e)
	if err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if got := ptr.Deref(e.Spec.Replicas, -1); got != 1 {
		t.Errorf("replicas %d, want the default 1", got)
	}
	if e.Spec.LogLevel != "info" || e.Spec.Image == "" || len(e.Spec.Ports) != 1 {
		t.Errorf("defaults not applied: %+v", e.Spec)
	}
}
