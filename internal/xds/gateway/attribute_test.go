package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// nackCase reads testdata/nacks/<name>: the route configurations a real
// Envoy (1.40) was served over ADS (.json), and the error_detail of its
// NACK of them (.txt), as it sent it.
func nackCase(t *testing.T, name string) (translate.Config, string) {
	t.Helper()
	rcs, err := os.ReadFile(filepath.Join("testdata", "nacks", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := os.ReadFile(filepath.Join("testdata", "nacks", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(rcs, &raws); err != nil {
		t.Fatal(err)
	}
	c := translate.Config{Name: ConfigName("infra", "gw")}
	for _, raw := range raws {
		c.Spec.Resources.Routes = append(c.Spec.Resources.Routes, runtime.RawExtension{Raw: raw})
	}
	return c, string(msg)
}

func key(kind, ns, name string) RouteKey {
	return RouteKey{Kind: gwv1.Kind(kind), NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// A proxy's rejection is attributed to the route whose rules it names,
// by where they are or by what it quotes of them; one that names none is
// the whole Config's. The messages are real Envoys' NACKs.
func TestAttribute(t *testing.T) {
	for _, c := range []struct {
		name string
		// cut has the message cut as the operator keeps a NACK.
		cut  bool
		want []Attribution
	}{
		{name: "pgv", want: []Attribution{{Route: key("HTTPRoute", "apps", "bad"), Generation: 7, Entries: []string{"HTTPRoute/apps/bad/rule/1/match/0"}}}},
		// Cut, the path of the failed field is lost: the dump's route names
		// are not taken for the culprit.
		{name: "pgv", cut: true, want: []Attribution{}},
		{name: "regex", want: []Attribution{{Route: key("GRPCRoute", "apps", "bad"), Generation: 2, Entries: []string{"GRPCRoute/apps/bad/rule/0/match/0"}}}},
		{name: "weights", want: []Attribution{}},
		{name: "host", want: []Attribution{}},
	} {
		cfg, msg := nackCase(t, c.name)
		if c.cut {
			msg = msg[:resource.MaxNACKDetail]
		}
		if got := Attribute(cfg, msg); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s (cut %v): Attribute = %+v, want %+v", c.name, c.cut, got, c.want)
		}
	}
}

// On a Gateway's translation: a rejection quoting a route's regular
// expression, in the words Envoy gives it, is that route's, at the
// generation served; a rejection by the place of a route, in a Config
// of several ports' route configurations, is the route at that place.
func TestAttributeTranslated(t *testing.T) {
	_, in := readCase(t, filepath.Join("testdata", "in", "http-routing.yaml"))
	cfg := Translate(in).Config
	got := Attribute(cfg, "regex '/re/[0-9]+' RE2 program size of 402 > max program size of 100 set for the error level threshold. Increase configured max program size if necessary.")
	want := []Attribution{{Route: key("HTTPRoute", "infra", "matching"), Generation: 2, Entries: []string{"HTTPRoute/infra/matching/rule/0/match/2"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Attribute = %+v, want %+v", got, want)
	}

	_, in = readCase(t, filepath.Join("testdata", "in", "attachment.yaml"))
	cfg = Translate(in).Config
	rcs := allRouteConfigurations(cfg)
	if len(rcs) < 2 {
		t.Fatalf("%d route configurations, want several", len(rcs))
	}
	last := rcs[len(rcs)-1]
	vh := len(last.GetVirtualHosts()) - 1
	r := last.GetVirtualHosts()[vh].GetRoutes()[0]
	k, gen, _ := routeKeyOf(r)
	msg := "goo.gle/debugstr \nname: \"" + last.GetName() + "\"\nvirtual_hosts {\n" +
		": Proto constraint validation failed (RouteConfigurationValidationError.VirtualHosts[" + strconv.Itoa(vh) + "]: embedded message failed validation | caused by VirtualHostValidationError.Routes[0]: embedded message failed validation)"
	if got := Attribute(cfg, msg); len(got) != 1 || got[0].Route != k || got[0].Generation != gen || !strings.HasPrefix(got[0].Entries[0], string(k.Kind)+"/") {
		t.Errorf("Attribute = %+v, want %v at generation %d", got, k, gen)
	}
}
