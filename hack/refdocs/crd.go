package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// field is one field of a kind's schema.
type field struct {
	Path, Type, Default, Description string
	Required                         bool
	Validation                       []string
}

// readCRDs reads the CustomResourceDefinitions of a directory, by kind.
func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: a %s, not a CustomResourceDefinition", f, crd.Kind)
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s", dir)
	}
	slices.SortFunc(out, func(a, b *apiextensionsv1.CustomResourceDefinition) int {
		return strings.Compare(a.Spec.Names.Kind, b.Spec.Names.Kind)
	})
	return out, nil
}

// schemaFields lists the fields of a version's schema, depth first in the
// order of their names, leaving out the top's metadata, kind and apiVersion.
// The fields of an array's items are under <field>[], those of a map's
// values under <field>.*. external names the Go type of a field whose own
// fields are left out (another module's, "" for none); its type says so.
func schemaFields(s *apiextensionsv1.JSONSchemaProps, external map[string]string) []field {
	var out []field
	var children func(path string, s *apiextensionsv1.JSONSchemaProps)
	children = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			if path == "" && (n == "metadata" || n == "kind" || n == "apiVersion") {
				continue
			}
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			p := s.Properties[n]
			f := field{Path: join(path, n), Type: schemaType(&p), Required: slices.Contains(s.Required, n), Description: p.Description, Validation: validation(&p)}
			if p.Default != nil {
				f.Default = string(p.Default.Raw)
			}
			for _, in := range []struct {
				what string
				s    *apiextensionsv1.JSONSchemaProps
			}{{"each item", items(&p)}, {"each value", values(&p)}} {
				for in.s != nil {
					for _, v := range validation(in.s) {
						f.Validation = append(f.Validation, in.what+": "+v)
					}
					in.s = items(in.s)
				}
			}
			if t := external[f.Path]; t != "" && hasFields(&p) {
				f.Type += ": " + t
				out = append(out, f)
				continue
			}
			out = append(out, f)
			children(f.Path, &p)
		}
		if it := items(s); it != nil {
			children(path+"[]", it)
		}
		if v := values(s); v != nil {
			children(path+".*", v)
		}
	}
	children("", s)
	return out
}

// hasFields reports whether a schema, or its items' or values', has fields.
func hasFields(s *apiextensionsv1.JSONSchemaProps) bool {
	for ; s != nil; s = items(s) {
		if len(s.Properties) > 0 || (values(s) != nil && hasFields(values(s))) {
			return true
		}
	}
	return false
}

// items is the schema of an array's items, or nil.
func items(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.Items == nil {
		return nil
	}
	return s.Items.Schema
}

// values is the schema of a map's values, or nil.
func values(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s.AdditionalProperties == nil || !s.AdditionalProperties.Allows {
		return nil
	}
	return s.AdditionalProperties.Schema
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// schemaType names a schema's type: arrays and maps by their items' types.
func schemaType(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "integer or string"
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "[]" + schemaType(s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + schemaType(s.AdditionalProperties.Schema)
	case s.Type == "object" && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && len(s.Properties) == 0:
		return "object (any fields)"
	case s.Format != "":
		return s.Type + " (" + s.Format + ")"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// validation lists the limits a schema names itself (not its items').
func validation(s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if len(s.Enum) > 0 {
		var vs []string
		for _, e := range s.Enum {
			vs = append(vs, "`"+string(e.Raw)+"`")
		}
		out = append(out, "one of "+strings.Join(vs, ", "))
	}
	num := func(what string, v *float64, exclusive bool) {
		if v != nil {
			if exclusive {
				what += " (exclusive)"
			}
			out = append(out, what+" "+strconv.FormatFloat(*v, 'f', -1, 64))
		}
	}
	num("minimum", s.Minimum, s.ExclusiveMinimum)
	num("maximum", s.Maximum, s.ExclusiveMaximum)
	count := func(what string, v *int64) {
		if v != nil {
			out = append(out, what+" "+strconv.FormatInt(*v, 10))
		}
	}
	count("min length", s.MinLength)
	count("max length", s.MaxLength)
	count("min items", s.MinItems)
	count("max items", s.MaxItems)
	count("min properties", s.MinProperties)
	count("max properties", s.MaxProperties)
	if s.MultipleOf != nil {
		out = append(out, "multiple of "+strconv.FormatFloat(*s.MultipleOf, 'f', -1, 64))
	}
	if s.Pattern != "" {
		out = append(out, "pattern `"+s.Pattern+"`")
	}
	if s.UniqueItems {
		out = append(out, "unique items")
	}
	if s.XListType != nil {
		switch *s.XListType {
		case "map":
			out = append(out, "a list map keyed by "+strings.Join(s.XListMapKeys, ", "))
		case "set":
			out = append(out, "a set")
		}
	}
	for _, r := range s.XValidations {
		msg := r.Message
		if msg == "" {
			msg = "`" + r.Rule + "`"
		}
		out = append(out, msg)
	}
	return out
}

// apiFieldsHeader is the first line of api-fields.md; hack/verify-generated.sh
// knows the page by it.
const apiFieldsHeader = "<!-- Generated by hack/refdocs (make generate) from the CustomResourceDefinitions in config/crd/bases. Do not edit. -->"

// apiFieldsPage is the field reference of the kinds the CRDs define.
// external gives, for a kind's group, version and name, the fields whose
// own fields are left out (externalFields).
func apiFieldsPage(crds []*apiextensionsv1.CustomResourceDefinition, external func(group, version, kind string) (map[string]string, error)) (string, error) {
	var b strings.Builder
	b.WriteString(apiFieldsHeader + "\n")
	b.WriteString("# API fields\n\n")
	b.WriteString("Every field of each kind, as its CustomResourceDefinition's OpenAPI schema states it: the API server checks\n")
	b.WriteString("the types and the validation listed here before admission does ([Validation rules](validation-rules.md)); the\n")
	b.WriteString("defaults are filled in when an object is written. `[]` stands for each item of a list, `.*` for each value of a\n")
	b.WriteString("map. What each kind does is in [API](api.md).\n")
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			scope := "namespaced"
			if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
				scope = "cluster-scoped"
			}
			fmt.Fprintf(&b, "\n## %s\n\n%s, %s.\n\n", crd.Spec.Names.Kind, code(crd.Spec.Group+"/"+v.Name), scope)
			ext, err := external(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)
			if err != nil {
				return "", err
			}
			var rows [][]string
			for _, f := range schemaFields(v.Schema.OpenAPIV3Schema, ext) {
				req := ""
				if f.Required {
					req = "yes"
				}
				rows = append(rows, []string{code(f.Path), cell(f.Type), req, code(f.Default), cell(f.Description), cell(strings.Join(f.Validation, "; "))})
			}
			b.WriteString(table([]string{"field", "type", "required", "default", "description", "validation"}, rows))
		}
	}
	return b.String(), nil
}
