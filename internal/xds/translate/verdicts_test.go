package translate

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// A real Envoy's verdict on an EnvoyConfig's current content
// (Input.Envoy) is read only for that content: content it refused is
// treated as invalid content is (its published content served instead, or
// nothing), and content no Envoy judged is served on the rules alone, with
// the reason in its status.
func TestEnvoyVerdicts(t *testing.T) {
	withCluster := func(name string) Config {
		return Config{Name: "ns/c", Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{Clusters: []runtime.RawExtension{{Raw: []byte(
			`{"name": "` + name + `", "type": "STATIC", "connect_timeout": "1s"}`)}}}}}
	}
	published, current := withCluster("old"), withCluster("new")
	tests := []struct {
		name         string
		published    []Config
		verdict      *EnvoyVerdict
		wantChoice   Choice
		wantRefused  string
		wantUnjudged string
	}{
		{"no verdict", []Config{published}, nil, ChoiceCurrent, "", ""},
		{"loaded", []Config{published}, &EnvoyVerdict{Content: ContentOf(current)}, ChoiceCurrent, "", ""},
		{"refused, published content served", []Config{published}, &EnvoyVerdict{Content: ContentOf(current), Refused: "Envoy refuses"}, ChoicePublished, "Envoy refuses", ""},
		{"refused, never published", nil, &EnvoyVerdict{Content: ContentOf(current), Refused: "Envoy refuses"}, ChoiceNone, "Envoy refuses", ""},
		{"refused, of other content", []Config{published}, &EnvoyVerdict{Content: ContentOf(published), Refused: "Envoy refuses"}, ChoiceCurrent, "", ""},
		{"unjudged", []Config{published}, &EnvoyVerdict{Content: ContentOf(current), Unjudged: "no Envoy"}, ChoiceCurrent, "", "no Envoy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Configs: []Config{current}, Published: tt.published}
			if tt.verdict != nil {
				in.Envoy = map[string]EnvoyVerdict{current.Name: *tt.verdict}
			}
			ir := Translate(in)
			st := ir.Configs[current.Name]
			if st.Choice != tt.wantChoice || st.EnvoyRefused != tt.wantRefused || st.EnvoyUnjudged != tt.wantUnjudged {
				t.Errorf("choice %s, refused %q, unjudged %q; want %s, %q, %q", st.Choice, st.EnvoyRefused, st.EnvoyUnjudged, tt.wantChoice, tt.wantRefused, tt.wantUnjudged)
			}
			if tt.verdict != nil && tt.verdict.Loaded() {
				if without := Translate(Input{Configs: []Config{current}, Published: tt.published}); !reflect.DeepEqual(ir, without) {
					t.Errorf("a verdict that loaded changed the translation:\n%+v\nwithout it:\n%+v", ir, without)
				}
			}
			served := map[string]bool{}
			for _, c := range ir.Revision {
				served[ContentOf(c)] = true
			}
			if served[ContentOf(current)] != (tt.wantChoice == ChoiceCurrent) {
				t.Errorf("current content served: %v; want %v", served[ContentOf(current)], tt.wantChoice == ChoiceCurrent)
			}
		})
	}
}
