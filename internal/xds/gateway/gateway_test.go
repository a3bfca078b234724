package gateway

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

var update = flag.Bool("update", false, "rewrite testdata/out from the current output")

// testCase is a file of testdata/in: one Gateway and what it reads, and
// the EndpointSlices of the Services, for translate.
type testCase struct {
	Gateway    gwv1.Gateway                 `json:"gateway"`
	HTTPRoutes []gwv1.HTTPRoute             `json:"httpRoutes"`
	GRPCRoutes []gwv1.GRPCRoute             `json:"grpcRoutes"`
	Namespaces map[string]map[string]string `json:"namespaces"`
	Services   []corev1.Service             `json:"services"`
	// Secrets' stringData is moved to data, as the API server does.
	Secrets        []corev1.Secret             `json:"secrets"`
	Grants         []gwv1beta1.ReferenceGrant  `json:"grants"`
	EndpointSlices []discoveryv1.EndpointSlice `json:"endpointSlices"`
}

// golden is a case's testdata/out file: the Output, with its Config's
// resources as objects.
type golden struct {
	Gateway       gwv1.GatewayStatus                  `json:"gateway"`
	ListenerValid map[gwv1.SectionName]bool           `json:"listenerValid"`
	HTTPRoutes    map[string][]gwv1.RouteParentStatus `json:"httpRoutes,omitempty"`
	GRPCRoutes    map[string][]gwv1.RouteParentStatus `json:"grpcRoutes,omitempty"`
	Config        translate.Config                    `json:"config"`
}

func readCase(t *testing.T, path string) (testCase, Input) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tc testCase
	if err := yaml.UnmarshalStrict(b, &tc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	in := Input{
		Class:      gwv1.GatewayClass{Spec: gwv1.GatewayClassSpec{ControllerName: ControllerName}},
		Gateway:    tc.Gateway,
		FleetName:  "edge",
		HTTPRoutes: tc.HTTPRoutes,
		GRPCRoutes: tc.GRPCRoutes,
		Namespaces: tc.Namespaces,
		Services:   map[types.NamespacedName]corev1.Service{},
		Secrets:    map[types.NamespacedName]corev1.Secret{},
		Grants:     tc.Grants,
	}
	for _, s := range tc.Services {
		in.Services[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	for i, s := range tc.Secrets {
		for k, v := range s.StringData {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		tc.Secrets[i] = s
		in.Secrets[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	return tc, in
}

func goldenOf(out Output) golden {
	return golden{Gateway: out.Gateway, ListenerValid: out.ListenerValid, HTTPRoutes: byName(out.HTTPRoutes), GRPCRoutes: byName(out.GRPCRoutes), Config: out.Config}
}

func byName(m map[types.NamespacedName][]gwv1.RouteParentStatus) map[string][]gwv1.RouteParentStatus {
	out := map[string][]gwv1.RouteParentStatus{}
	for k, v := range m {
		out[k.String()] = v
	}
	return out
}

// TestGolden translates every testdata/in case and compares the Output
// with its testdata/out file; go test -update rewrites them. Each Config
// is also translated by translate, which must serve it whole.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/in/*.yaml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases in testdata/in: %v", err)
	}
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			tc, in := readCase(t, path)
			out := Translate(in)
			// The Config is a function of the objects, not of the order they
			// are listed in.
			slices.Reverse(in.HTTPRoutes)
			slices.Reverse(in.GRPCRoutes)
			slices.Reverse(in.Grants)
			again := Translate(in)
			if a, b := toJSON(t, goldenOf(out)), toJSON(t, goldenOf(again)); a != b {
				t.Errorf("translating the objects in another order gave another Output:\n%s\n%s", a, b)
			}
			compare(t, name+".yaml", toYAML(t, goldenOf(out)))
			ir := translateConfig(t, tc, out.Config)
			checkServed(t, ir, out.Config)
		})
	}
}

// translateConfig has translate make the fleet's IR of c alone, with the
// case's EndpointSlices and Secrets as the operator would give them: the
// Secrets labelled for the control plane, those of another namespace and
// the slices of another namespace's Services by namespace/name.
func translateConfig(t *testing.T, tc testCase, c translate.Config) translate.IR {
	t.Helper()
	ns := tc.Gateway.Namespace
	in := translate.Input{
		Configs: []translate.Config{c},
		Slices:  map[string][]discoveryv1.EndpointSlice{},
		Secrets: map[string]corev1.Secret{},
		Policy:  translate.Policy{Namespace: "kube-envoy-controller", Hosts: []string{"xds.example.com"}},
	}
	for _, s := range tc.EndpointSlices {
		key := localRef(ns, types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]})
		in.Slices[key] = append(in.Slices[key], s)
	}
	for _, s := range tc.Secrets {
		s.Labels = map[string]string{names.XDSSecretLabel: names.XDSSecretTLS}
		in.Secrets[localRef(ns, types.NamespacedName{Namespace: s.Namespace, Name: s.Name})] = s
	}
	return translate.Translate(in)
}

// checkServed checks that translate serves c as it is: nothing invalid,
// refused, dangling or clashing, every certificate served.
func checkServed(t *testing.T, ir translate.IR, c translate.Config) {
	t.Helper()
	st := ir.Configs[c.Name]
	if st.Choice != translate.ChoiceCurrent || len(st.Invalid) > 0 || len(st.Refused) > 0 || len(st.Dangling) > 0 || len(st.Clashes) > 0 || len(st.Secrets) > 0 || len(ir.Held) > 0 {
		t.Errorf("translate does not serve the Config whole: %s", toJSON(t, st))
	}
	if got, want := len(ir.Resources[resourcev3.SecretType]), len(c.Spec.TLSSecrets); got != want {
		t.Errorf("%d secrets served, want %d", got, want)
	}
}

// TestLoadsInEnvoy has a real Envoy load what each case's fleet is served.
func TestLoadsInEnvoy(t *testing.T) {
	envoy := realenvoy.Require(t)
	cases, err := filepath.Glob("testdata/in/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc, in := readCase(t, path)
			ir := translateConfig(t, tc, Translate(in).Config)
			var r realenvoy.Resources
			types := make([]string, 0, len(ir.Resources))
			for typeURL := range ir.Resources {
				types = append(types, typeURL)
			}
			sort.Strings(types)
			for _, typeURL := range types {
				for _, m := range ir.Resources[typeURL] {
					if err := r.AddMessage(m); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := realenvoy.Load(envoy, t.TempDir(), r); err != nil {
				if errors.Is(err, realenvoy.ErrRefused) {
					t.Fatalf("Envoy refuses the Gateway's resources: %s", realenvoy.Said(err))
				}
				t.Fatal(err)
			}
		})
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func toYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compare(t *testing.T, file string, got []byte) {
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
