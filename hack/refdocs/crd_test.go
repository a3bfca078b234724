package main

import (
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const testSchema = `
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    required: [size]
    x-kubernetes-validations:
    - rule: self.size > 0
      message: size must be positive
    properties:
      size: {type: integer, format: int32, minimum: 1, maximum: 10, default: 3, description: "Size\n  of it."}
      mode: {type: string, enum: [a, b]}
      items:
        type: array
        maxItems: 4
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          properties:
            name: {type: string, pattern: "^[a-z]+$"}
      labels:
        type: object
        additionalProperties: {type: string, maxLength: 63}
      template:
        type: object
        properties:
          spec: {type: object}
      port:
        x-kubernetes-int-or-string: true
        anyOf: [{type: integer}, {type: string}]
      raw:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

func TestSchemaFields(t *testing.T) {
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(testSchema), &s); err != nil {
		t.Fatal(err)
	}
	got := schemaFields(&s, map[string]string{"spec.template": "k8s.io/api/core/v1.PodTemplateSpec", "spec.mode": "example.com/x.Mode"})
	want := []field{
		{Path: "spec", Type: "object", Validation: []string{"size must be positive"}},
		{Path: "spec.items", Type: "[]object", Validation: []string{"max items 4", "a list map keyed by name"}},
		{Path: "spec.items[].name", Type: "string", Validation: []string{"pattern `^[a-z]+$`"}},
		{Path: "spec.labels", Type: "map[string]string", Validation: []string{"each value: max length 63"}},
		{Path: "spec.mode", Type: "string", Validation: []string{"one of `\"a\"`, `\"b\"`"}},
		{Path: "spec.port", Type: "integer or string"},
		{Path: "spec.raw", Type: "object (any fields)"},
		{Path: "spec.size", Type: "integer (int32)", Default: "3", Required: true, Description: "Size\n  of it.", Validation: []string{"minimum 1", "maximum 10"}},
		{Path: "spec.template", Type: "object: k8s.io/api/core/v1.PodTemplateSpec"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestAPIFieldsPage(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Scope = "shop.example", "Cart", apiextensionsv1.NamespaceScoped
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(testSchema), &s); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s}},
		{Name: "v0", Served: false, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s}},
	}
	page, err := apiFieldsPage([]*apiextensionsv1.CustomResourceDefinition{crd}, func(g, v, k string) (map[string]string, error) {
		if g != "shop.example" || v != "v1" || k != "Cart" {
			t.Errorf("external(%s, %s, %s)", g, v, k)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(page, apiFieldsHeader+"\n") {
		t.Error("the page does not start with its header")
	}
	for _, s := range []string{
		"## Cart\n\n`shop.example/v1`, namespaced.\n",
		"| `spec.size` | integer (int32) | yes | `3` | Size of it. | minimum 1; maximum 10 |\n",
		"| `spec.template.spec` | object |  |  |  |  |\n",
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the page has no %q:\n%s", s, page)
		}
	}
	if strings.Count(page, "## Cart") != 1 {
		t.Error("a version that is not served is listed")
	}
}
