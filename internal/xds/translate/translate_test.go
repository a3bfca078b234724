package translate

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/out from the current output")

// testCase is a file of testdata/in: a fleet's EnvoyConfigs, what its
// published revision serves, the EndpointSlices of its Services, and the
// Secrets labelled for the control plane (those the operator's cache holds).
type testCase struct {
	Published      []Config                    `json:"published"`
	Configs        []Config                    `json:"configs"`
	EndpointSlices []discoveryv1.EndpointSlice `json:"endpointSlices"`
	// Secrets' stringData is moved to data, as the API server does.
	Secrets []corev1.Secret `json:"secrets"`
	// Policy is the content policy; testPolicy when not set.
	Policy *Policy `json:"policy"`
}

// outputs are the files of testdata/out for one case, by suffix.
var outputs = []struct{ suffix, typeURL string }{
	{"listeners", resourcev3.ListenerType},
	{"routes", resourcev3.RouteType},
	{"clusters", resourcev3.ClusterType},
	{"endpoints", resourcev3.EndpointType},
	{"secrets", resourcev3.SecretType},
}

// status is the .status.yaml output: the IR but for its resources.
type status struct {
	Version string                  `json:"version"`
	Served  []string                `json:"served"`
	Held    []string                `json:"held,omitempty"`
	Configs map[string]ConfigStatus `json:"configs"`
}

// TestGolden translates every testdata/in case and compares each part of
// the IR with its testdata/out file; go test -update rewrites them.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/in/*.yaml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases in testdata/in: %v", err)
	}
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			ir := Translate(readCase(t, path))
			// A fleet's IR is a pure function of its input.
			if again := Translate(readCase(t, path)); again.Version != ir.Version {
				t.Errorf("translating twice gave versions %s and %s", ir.Version, again.Version)
			}
			st := status{Version: ir.Version, Held: ir.Held, Configs: ir.Configs}
			for _, c := range ir.Revision {
				st.Served = append(st.Served, c.Name)
			}
			golden(t, name+".status.yaml", toYAML(t, st))
			for _, o := range outputs {
				file := name + "." + o.suffix + ".yaml"
				if o.typeURL == resourcev3.SecretType && len(ir.Resources[o.typeURL]) == 0 {
					if _, err := os.Stat(filepath.Join("testdata/out", file)); err == nil {
						t.Errorf("%s exists, but the fleet gets no secrets", file)
					}
					continue
				}
				golden(t, file, resourcesYAML(t, ir.Resources[o.typeURL]))
			}
		})
	}
}

func readCase(t *testing.T, path string) Input {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tc testCase
	if err := yaml.UnmarshalStrict(b, &tc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	in := Input{Configs: tc.Configs, Published: tc.Published, Slices: map[string][]discoveryv1.EndpointSlice{}, Policy: testPolicy}
	if tc.Policy != nil {
		in.Policy = *tc.Policy
	}
	for i := range in.Published {
		in.Published[i] = in.Published[i].Recorded()
	}
	for _, s := range tc.EndpointSlices {
		svc := s.Labels[discoveryv1.LabelServiceName]
		in.Slices[svc] = append(in.Slices[svc], s)
	}
	in.Secrets = map[string]corev1.Secret{}
	for _, s := range tc.Secrets {
		for k, v := range s.StringData {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		in.Secrets[s.Name] = s
	}
	return in
}

// resourcesYAML writes resources in Envoy's field names, as YAML.
func resourcesYAML(t *testing.T, rs []types.Resource) []byte {
	t.Helper()
	list := make([]any, 0, len(rs))
	for _, r := range rs {
		js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(js, &v); err != nil { // protojson's spacing is not stable; this is
			t.Fatal(err)
		}
		list = append(list, v)
	}
	return toYAML(t, list)
}

func toYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata/out", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the output:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
