package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// seedSample is config/samples/example_v1_envoy.yaml.
func seedSample() *examplev1.Envoy {
	return &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-envoy", Namespace: "default"},
		Spec: examplev1.EnvoySpec{
			Name: "webserver-beta", ConfigMapName: "envoy-cfg-1",
			XDS: &examplev1.XDS{Name: "xds_cluster", Host: "xds-service.default", Port: 19000},
		},
	}
}

func TestNames(t *testing.T) {
	e := seedSample()
	if Name(e) != "webserver-beta" || ConfigMapName(e) != "envoy-cfg-1" {
		t.Errorf("names = %s, %s", Name(e), ConfigMapName(e))
	}
	bare := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns"}}
	if Name(bare) != "bare" || ConfigMapName(bare) != "bare-bootstrap" || Replicas(bare) != 1 || len(Ports(bare)) != 1 {
		t.Errorf("defaults = %s, %s, %d, %v", Name(bare), ConfigMapName(bare), Replicas(bare), Ports(bare))
	}
}

func TestXDSServer(t *testing.T) {
	builtin := Defaults{XDS: proxy.XDSServer{ClusterName: XDSClusterName, Host: "builtin.svc", Port: 18000}}
	e := seedSample()
	if got := XDSServer(e, builtin); got.String() != "xds-service.default:19000" || got.ClusterName != "xds_cluster" {
		t.Errorf("xds = %+v", got)
	}
	e.Spec.XDS = nil
	if XDSServer(e, builtin) != builtin.XDS {
		t.Errorf("a fleet without spec.xds must use the built-in server")
	}
	e.Spec.XDS = &examplev1.XDS{Host: "h", Port: 1}
	if got := XDSServer(e, builtin).ClusterName; got != XDSClusterName {
		t.Errorf("default xds cluster name = %q", got)
	}
}

func TestIDRoundTrip(t *testing.T) {
	id := Of(seedSample())
	if id.String() != "default/edge-envoy" {
		t.Errorf("String = %q", id)
	}
	back, err := Parse(id.String())
	if err != nil || back != id {
		t.Errorf("Parse(%q) = %v, %v", id, back, err)
	}
	for _, bad := range []string{"", "default", "/edge", "default/", "Default/edge", "a/b/c", "default/Edge_Envoy"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted a fleet no Envoy can have", bad)
		}
	}
}

func TestContainerOptions(t *testing.T) {
	e := seedSample()
	o := ContainerOptions(e, Defaults{})
	if o.Image != DefaultImage || o.LogLevel != DefaultLogLevel || o.FleetID != "default/edge-envoy" || len(o.ListenerPorts) != 0 {
		t.Errorf("options = %+v", o)
	}
	e.Spec.Image, e.Spec.LogLevel = "envoy:custom", "debug"
	if o := ContainerOptions(e, Defaults{}); o.Image != "envoy:custom" || o.LogLevel != "debug" {
		t.Errorf("the spec's image and log level are not used: %+v", o)
	}
	ports, low := ListenerPorts(e)
	if len(ports) != 1 || ports[0].ContainerPort != 8080 || low {
		t.Errorf("listener ports = %+v, low %v", ports, low)
	}
	e.Spec.Ports = []examplev1.EnvoyPort{{Name: "http", Port: 80}}
	if _, low := ListenerPorts(e); !low {
		t.Errorf("port 80 is below 1024")
	}
}

// The API server defaults some fields from the CRD's markers; the operator
// defaults the same fields when they are empty. Both must agree.
func TestCRDDefaultsAgree(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "example.com_envoys.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	def := func(props map[string]apiextensionsv1.JSONSchemaProps, field string) string {
		p, ok := props[field]
		if !ok || p.Default == nil {
			t.Fatalf("the CRD has no default for %s", field)
		}
		return string(p.Default.Raw)
	}
	for field, want := range map[string]string{
		"image":    `"` + DefaultImage + `"`,
		"logLevel": `"` + DefaultLogLevel + `"`,
		"replicas": "1",
	} {
		if got := def(spec.Properties, field); got != want {
			t.Errorf("CRD default of spec.%s = %s, the operator's = %s", field, got, want)
		}
	}
	if got := def(spec.Properties["xds"].Properties, "name"); got != `"`+XDSClusterName+`"` {
		t.Errorf("CRD default of spec.xds.name = %s, the operator's = %q", got, XDSClusterName)
	}
	// The rule on terminationGracePeriodSeconds defaults drainSeconds itself.
	drain := fmt.Sprintf("(has(self.drainSeconds) ? self.drainSeconds : %d)", DefaultDrainSeconds)
	found := false
	for _, r := range spec.XValidations {
		found = found || strings.Contains(r.Rule, drain)
	}
	if !found {
		t.Errorf("no rule of spec defaults drainSeconds to the operator's %d: %v", DefaultDrainSeconds, spec.XValidations)
	}
}
