package main

import (
	"path/filepath"
	"reflect"
	"testing"
)

func TestExternalFields(t *testing.T) {
	api := filepath.Join(t.TempDir(), "api")
	writeAPI(t, filepath.Join(api, "shop", "v1"), map[string]string{
		"doc.go": "// +groupName=shop.example\npackage v1\n",
		"types.go": `package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type Cart struct {
	metav1.TypeMeta   ` + "`json:\",inline\"`" + `
	metav1.ObjectMeta ` + "`json:\"metadata,omitempty\"`" + `
	Spec   CartSpec   ` + "`json:\"spec\"`" + `
	Status CartStatus ` + "`json:\"status,omitempty\"`" + `
}

type CartSpec struct {
	Shared   ` + "`json:\",inline\"`" + `
	Template *corev1.PodTemplateSpec ` + "`json:\"template,omitempty\"`" + `
	Lines    []Line ` + "`json:\"lines\"`" + `
	ByName   map[string]Line ` + "`json:\"byName\"`" + `
	Ignored  corev1.Volume ` + "`json:\"-\"`" + `
	Size     int32 ` + "`json:\"size\"`" + `
}

type Shared struct {
	Selector *metav1.LabelSelector ` + "`json:\"selector\"`" + `
}

type Line struct {
	Container corev1.Container ` + "`json:\"container\"`" + `
}

type CartStatus struct {
	Conditions []metav1.Condition ` + "`json:\"conditions,omitempty\"`" + `
}
`,
	})
	pkgs, err := readAPIPackages(api)
	if err != nil {
		t.Fatal(err)
	}
	got, err := externalFields(pkgs, "shop.example", "v1", "Cart")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"spec.template":           "k8s.io/api/core/v1.PodTemplateSpec",
		"spec.selector":           "k8s.io/apimachinery/pkg/apis/meta/v1.LabelSelector",
		"spec.lines[].container":  "k8s.io/api/core/v1.Container",
		"spec.byName.*.container": "k8s.io/api/core/v1.Container",
		"status.conditions":       "k8s.io/apimachinery/pkg/apis/meta/v1.Condition",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if _, err := externalFields(pkgs, "shop.example", "v2", "Cart"); err == nil {
		t.Error("no error for a version without a package")
	}
}
