// Package crdschema checks objects against the project's CRDs in process, as
// the API server checks a create: it applies the schema's defaults, then
// validates the OpenAPI schema, list types, embedded object metadata and the
// CEL rules, with the API server's own code (k8s.io/apiextensions-apiserver).
//
// The fuzz tests use it to tell the specs a user could store from those the
// API server refuses, so that what a render function gets is what it can
// meet in a cluster. It reads config/crd/bases; it is for tests only.
package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Schema is the schema of one kind's served version.
type Schema struct {
	Kind       string
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// Load reads the CRD of kind from dir (config/crd/bases).
func Load(dir, kind string) (*Schema, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if crd.Spec.Names.Kind == kind {
			return fromCRD(crd)
		}
	}
	return nil, fmt.Errorf("no CRD of kind %s in %s", kind, dir)
}

// LoadFromRoot reads the CRD of kind from config/crd/bases of the repository
// above the working directory, as a test in any package of it finds it.
func LoadFromRoot(kind string) (*Schema, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/kube-envoy-controller/kube-envoy-controller\n") {
			return Load(filepath.Join(dir, "config", "crd", "bases"), kind)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no repository root above the working directory")
		}
		dir = parent
	}
}

func fromCRD(crd *apiextensionsv1.CustomResourceDefinition) (*Schema, error) {
	var served *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Storage {
			served = &crd.Spec.Versions[i]
		}
	}
	if served == nil || served.Schema == nil || served.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("CRD %s has no stored version with a schema", crd.Name)
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(served.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	s := &Schema{Kind: crd.Spec.Names.Kind, structural: structural, validator: validator,
		cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
	return s, nil
}

// Admit defaults obj, a decoded JSON object, in place and returns the errors
// that the API server would answer its create with; none when it would
// store it.
func (s *Schema) Admit(obj map[string]any) field.ErrorList {
	structuraldefaulting.Default(obj, s.structural)
	var errs field.ErrorList
	if md, ok := obj["metadata"].(map[string]any); ok {
		name, _ := md["name"].(string)
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(name, false) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
		}
	}
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, s.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, obj, s.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
	if len(errs) == 0 && s.cel != nil {
		celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// AdmitObject is Admit of a typed object: on success, obj holds what the
// API server would store (its defaults applied).
func (s *Schema) AdmitObject(obj any) (field.ErrorList, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	// utiljson decodes integers as int64, as the API server's decoder does.
	u := map[string]any{}
	if err := utiljson.Unmarshal(b, &u); err != nil {
		return nil, err
	}
	if errs := s.Admit(u); len(errs) > 0 {
		return errs, nil
	}
	b, err = json.Marshal(u)
	if err != nil {
		return nil, err
	}
	return nil, json.Unmarshal(b, obj)
}
