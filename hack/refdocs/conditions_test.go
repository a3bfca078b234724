package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeAPI writes a package api/<group dir>/<version> of files.
func writeAPI(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, text := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAPIConditions(t *testing.T) {
	api := filepath.Join(t.TempDir(), "api")
	writeAPI(t, filepath.Join(api, "shop", "v1"), map[string]string{
		"doc.go": "// Package v1 is a group.\n// +groupName=shop.example\npackage v1\n",
		"types.go": `package v1

// +kubebuilder:object:root=true

// Cart is a kind.
type Cart struct{}

// +kubebuilder:object:root=true
type CartList struct{}

// CartItem is a kind whose name starts with another's.
// +kubebuilder:object:root=true
type CartItem struct{}

type notAKind struct{}
`,
		"conditions.go": `package v1

// The conditions of a Cart.
const (
	// CartConditionReady is True when
	// the cart is ready.
	CartConditionReady = "Ready"
	// CartReasonEmpty (Ready False): nothing in it.
	CartReasonEmpty = "Empty"
	// CartItemConditionReady: an item's.
	CartItemConditionReady = "Ready"
	unexported = "x"
)

// The events of a Cart: one per verb.
const (
	// CartEventAdded and CartEventRemoved (Normal): an item came or went.
	CartEventAdded   = "Added"
	CartEventRemoved = "Removed"
	CartEventEmptied = "Emptied"
	// CartItemEventEmptied (Warning): as CartEventEmptied.
	CartItemEventEmptied = CartEventEmptied
)
`,
	})
	got, err := apiConditions(api)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.ToSlash(filepath.Join(api, "shop", "v1", "conditions.go"))
	want := []kindConstants{
		{Kind: "Cart", GroupVersion: "shop.example/v1", File: file,
			Conditions: []constant{{"CartConditionReady", "Ready", "CartConditionReady is True when the cart is ready."}},
			Reasons:    []constant{{"CartReasonEmpty", "Empty", "CartReasonEmpty (Ready False): nothing in it."}},
			EventReasons: []constant{
				{"CartEventAdded", "Added", "CartEventAdded and CartEventRemoved (Normal): an item came or went."},
				{"CartEventRemoved", "Removed", "CartEventAdded and CartEventRemoved (Normal): an item came or went."},
				{"CartEventEmptied", "Emptied", "The events of a Cart: one per verb."},
			}},
		{Kind: "CartItem", GroupVersion: "shop.example/v1", File: file,
			Conditions:   []constant{{"CartItemConditionReady", "Ready", "CartItemConditionReady: an item's."}},
			EventReasons: []constant{{"CartItemEventEmptied", "Emptied", "CartItemEventEmptied (Warning): as CartEventEmptied."}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	page := conditionsReference(got)
	for _, s := range []string{"### Cart\n", "### CartItem\n", "| `Ready` | `CartConditionReady` | CartConditionReady is True when the cart is ready. |\n", "Event reasons:"} {
		if !strings.Contains(page, s) {
			t.Errorf("the reference has no %q:\n%s", s, page)
		}
	}
}

func TestAPIConditionsRefusesStrayConstants(t *testing.T) {
	api := filepath.Join(t.TempDir(), "api")
	writeAPI(t, filepath.Join(api, "shop", "v1"), map[string]string{
		"doc.go":        "// +groupName=shop.example\npackage v1\n",
		"types.go":      "package v1\n\n// +kubebuilder:object:root=true\ntype Cart struct{}\n",
		"conditions.go": "package v1\n\nconst BasketConditionReady = \"Ready\"\n",
	})
	if _, err := apiConditions(api); err == nil || !strings.Contains(err.Error(), "BasketConditionReady") {
		t.Errorf("error %v, want one naming BasketConditionReady", err)
	}
}
