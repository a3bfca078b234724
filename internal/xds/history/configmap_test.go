package history

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

const operatorNS = "kube-envoy-controller"

var edge = fleet.ID{Namespace: "shop", Name: "edge"}

// content returns a revision's content in namespace ns: one EnvoyConfig
// with one cluster, named name, whose JSON has characters that encoding
// escapes, so that a version read back is checked against the content as
// recorded.
func content(ns, name string) []translate.Config {
	return []translate.Config{{Name: ns + "/" + name, Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{
		Clusters: []runtime.RawExtension{{Raw: []byte(`{"name": "` + name + `", "alt_stat_name": "<a&b>", "connect_timeout": "1s"}`)}},
	}}}}
}

// recorded returns a revision that holds content, with the version it hashes to.
func recorded(name string, acked bool) publish.Revision {
	c := content(edge.Namespace, name)
	return publish.Revision{Version: translate.VersionOf(c), Configs: c, Acked: acked}
}

// A fleet's history reads back as it was; it is always the same bytes for
// the same history (an unchanged history is no write), in the operator's
// namespace, under a name of its own.
func TestHistoryRoundTrip(t *testing.T) {
	served, accepted := recorded("b", false), recorded("a", true)
	h := publish.History{Current: served.Version, Revisions: []publish.Revision{served, accepted, {Version: "0123456789abcdef", Rejected: "bad"}}}
	a, err := ConfigMap(operatorNS, edge, h)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ConfigMap(operatorNS, edge, h)
	if !bytes.Equal(a.BinaryData[historyKey], b.BinaryData[historyKey]) {
		t.Error("the same history encoded twice differs")
	}
	got, err := Read(a, operatorNS, edge)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != h.String() || got.Fleet != "shop/edge" || got.Served().Configs[0].Name != "shop/b" {
		t.Errorf("read back %q of %q", got.String(), got.Fleet)
	}
	if a.Namespace != operatorNS || !strings.HasPrefix(a.Name, "kube-envoy-controller-xds-history-") || len(a.Name) > 253 {
		t.Errorf("recorded as %s/%s", a.Namespace, a.Name)
	}
	if id, ok := Fleet(a, operatorNS); !ok || id != edge {
		t.Errorf("Fleet = %v %v", id, ok)
	}
	if _, ok := Fleet(a, "elsewhere"); ok {
		t.Error("Fleet takes a history outside the operator's namespace")
	}
}

// Fleets whose identities read alike, or are as long as names may be, get
// names of their own.
func TestHistoryNames(t *testing.T) {
	long := strings.Repeat("n", 63)
	ids := []fleet.ID{
		{Namespace: "a-b", Name: "c"}, {Namespace: "a", Name: "b-c"}, {Namespace: "a", Name: "b.c"},
		{Namespace: long, Name: strings.Repeat("x", 253)}, {Namespace: long, Name: strings.Repeat("x", 252) + "y"},
	}
	seen := map[string]fleet.ID{}
	for _, id := range ids {
		name := Name(id)
		if other, dup := seen[name]; dup {
			t.Errorf("%s and %s share the history %s", id, other, name)
		}
		seen[name] = id
		if len(name) > 253 {
			t.Errorf("%s: name of %d characters", id, len(name))
		}
	}
}

// Whatever is not the fleet's own, consistent history, as the operator
// wrote it, is refused: a copy in another namespace, under another name,
// without the operator's labels, for another fleet, or with content that
// does not hash to its versions.
func TestReadHistoryRefuses(t *testing.T) {
	served := recorded("b", false)
	good := publish.History{Current: served.Version, Revisions: []publish.Revision{served, recorded("a", true)}}
	encoded := func(h publish.History) []byte {
		b, err := encode(h)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	forged := recorded("b", false)
	forged.Configs[0].Spec.Resources.Clusters[0].Raw = []byte(`{"name": "attacker"}`) // the real version, other content
	other := content("other", "b")
	tests := []struct {
		name   string
		change func(cm *corev1.ConfigMap)
		want   string
	}{
		{"another namespace", func(cm *corev1.ConfigMap) { cm.Namespace = edge.Namespace }, "not the fleet's"},
		{"another name", func(cm *corev1.ConfigMap) { cm.Name = LegacyName(edge.Name) }, "not the fleet's"},
		{"without the managed-by label", func(cm *corev1.ConfigMap) { delete(cm.Labels, names.ManagedByLabel) }, "not the fleet's"},
		{"another fleet named", func(cm *corev1.ConfigMap) { cm.Annotations[FleetAnnotation] = "shop/other" }, "not the fleet's"},
		{"another fleet inside", func(cm *corev1.ConfigMap) {
			h := good
			h.Fleet = "shop/other"
			cm.BinaryData[historyKey] = encoded(h)
		}, `of fleet "shop/other"`},
		{"content that is not the version's", func(cm *corev1.ConfigMap) {
			cm.BinaryData[historyKey] = encoded(publish.History{Fleet: "shop/edge", Current: forged.Version, Revisions: []publish.Revision{forged}})
		}, "holds content whose version is"},
		{"an EnvoyConfig of another namespace", func(cm *corev1.ConfigMap) {
			r := publish.Revision{Version: translate.VersionOf(other), Configs: other}
			cm.BinaryData[historyKey] = encoded(publish.History{Fleet: "shop/edge", Current: r.Version, Revisions: []publish.Revision{r}})
		}, "not of namespace shop"},
		{"a version twice", func(cm *corev1.ConfigMap) {
			cm.BinaryData[historyKey] = encoded(publish.History{Fleet: "shop/edge", Current: served.Version, Revisions: []publish.Revision{served, served}})
		}, "recorded twice"},
		{"a served version it lacks", func(cm *corev1.ConfigMap) {
			cm.BinaryData[historyKey] = encoded(publish.History{Fleet: "shop/edge", Current: "0123456789abcdef", Revisions: []publish.Revision{served}})
		}, "not among the revisions"},
		{"a rejected revision with content", func(cm *corev1.ConfigMap) {
			r := recorded("c", false)
			r.Rejected = "bad"
			cm.BinaryData[historyKey] = encoded(publish.History{Fleet: "shop/edge", Current: served.Version, Revisions: []publish.Revision{served, r}})
		}, "rejected and keeps content"},
		{"not gzip", func(cm *corev1.ConfigMap) { cm.BinaryData[historyKey] = []byte("edited by hand") }, "gzip: invalid header"},
		{"not JSON", func(cm *corev1.ConfigMap) { cm.BinaryData[historyKey] = gzipped(t, []byte("edited")) }, "invalid character"},
		{"a bomb", func(cm *corev1.ConfigMap) {
			limit := maxDecoded
			t.Cleanup(func() { maxDecoded = limit })
			maxDecoded = 1 << 20
			cm.BinaryData[historyKey] = gzipped(t, make([]byte, maxDecoded+1))
		}, "inflates to more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm, err := ConfigMap(operatorNS, edge, good)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(cm)
			_, err = Read(cm, operatorNS, edge)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read = %v, want an error with %q", err, tt.want)
			}
			if notOurs := errors.Is(err, ErrNotHistory); notOurs != (tt.want == "not the fleet's") {
				t.Errorf("errors.Is(%v, ErrNotHistory) = %v", err, notOurs)
			}
		})
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// legacy returns the previous release's history of edge, as it recorded it.
func legacy(t *testing.T, h publish.History) *corev1.ConfigMap {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{BinaryData: map[string][]byte{historyKey: gzipped(t, b)}}
	cm.Namespace, cm.Name = edge.Namespace, LegacyName(edge.Name)
	cm.Labels = map[string]string{names.ManagedByLabel: names.ManagedByValue, names.ComponentLabel: LegacyComponent}
	cm.Annotations = map[string]string{FleetAnnotation: edge.Name}
	return cm
}

// A legacy history gives its served revision, and only that, when the
// EnvoyConfigs' status vouches for its version and its content hashes to
// it; a forgery gives nothing.
func TestAdoptLegacy(t *testing.T) {
	served, accepted := recorded("b", false), recorded("a", true)
	h := publish.History{Current: served.Version, Revisions: []publish.Revision{served, accepted, {Version: "0123456789abcdef", Rejected: "bad"}}}
	got, ok := AdoptLegacy(legacy(t, h), edge, served.Version)
	if !ok || got.String() != served.Version+"*" || got.Fleet != "shop/edge" {
		t.Fatalf("adopted %q %v, want only the served revision, unmarked", got.String(), ok)
	}
	if _, err := ConfigMap(operatorNS, edge, got); err != nil {
		t.Fatal(err)
	}

	forged := recorded("b", false)
	forged.Configs[0].Spec.Resources.Clusters[0].Raw = []byte(`{"name": "attacker"}`)
	other := content("other", "b")
	for name, cm := range map[string]*corev1.ConfigMap{
		"the status vouches for another version": legacy(t, publish.History{Current: accepted.Version, Revisions: []publish.Revision{accepted, served}}),
		"content that is not the version's":      legacy(t, publish.History{Current: served.Version, Revisions: []publish.Revision{forged}}),
		"an EnvoyConfig of another namespace": legacy(t, publish.History{Current: translate.VersionOf(other),
			Revisions: []publish.Revision{{Version: translate.VersionOf(other), Configs: other}}}),
		"another fleet": func() *corev1.ConfigMap {
			cm := legacy(t, h)
			cm.Annotations[FleetAnnotation] = "other"
			return cm
		}(),
		"another name": func() *corev1.ConfigMap {
			cm := legacy(t, h)
			cm.Name = "edge-copy"
			return cm
		}(),
		"not gzip": func() *corev1.ConfigMap {
			cm := legacy(t, h)
			cm.BinaryData[historyKey] = []byte("edited")
			return cm
		}(),
	} {
		if got, ok := AdoptLegacy(cm, edge, served.Version); ok {
			t.Errorf("%s: adopted %q", name, got.String())
		}
	}
	if _, ok := AdoptLegacy(legacy(t, h), edge, ""); ok {
		t.Error("adopted a legacy history that no status vouches for")
	}
}

// A history that records a rollout reads back with it, says in its
// metadata which proxies it serves (for the replicas' watches), and, when
// it must drop the content of revisions to fit, keeps the content of the
// revision the rollout serves the other proxies.
func TestHistoryKeepsItsRollout(t *testing.T) {
	served, previous := recorded("b", false), recorded("a", false)
	r := publish.Rollout{Revision: served.Version, Previous: previous.Version, Phase: publish.RolloutProgressing, Step: 1, Cut: "00000000000000ff",
		Verdicts: []publish.StepVerdict{{Step: 0, Outcome: "Pass", Proxies: publish.StepFigures{Proxies: 1, Requests: 200, ErrorRatio: 0.005, P99: 4.96},
			Baseline: publish.StepFigures{Proxies: 3, Requests: 3000, P99: 4.96}}}}
	h := publish.History{Current: served.Version, Revisions: []publish.Revision{served, previous}, Rollout: &r}
	cm, err := ConfigMap(operatorNS, edge, h)
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Annotations[RolloutAnnotation]; got != r.Key() {
		t.Errorf("rollout annotation %q, want %q", got, r.Key())
	}
	got, err := Read(cm, operatorNS, edge)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rollout == nil || !reflect.DeepEqual(*got.Rollout, r) {
		t.Errorf("read back rollout %+v, want %+v", got.Rollout, r)
	}

	// Too large to keep every revision's content: the previous one stays.
	big := func(name string) publish.Revision {
		c := content(edge.Namespace, name)
		c[0].Spec.Resources.Clusters[0].Raw = []byte(`{"name": "` + name + `", "alt_stat_name": "` + randomText(t, 450<<10) + `", "connect_timeout": "1s"}`)
		return publish.Revision{Version: translate.VersionOf(c), Configs: c}
	}
	cur, prev, other := big("c"), big("d"), big("e")
	r = publish.Rollout{Revision: cur.Version, Previous: prev.Version, Phase: publish.RolloutProgressing}
	h = publish.History{Current: cur.Version, Revisions: []publish.Revision{cur, other, prev}, Rollout: &r}
	if cm, err = ConfigMap(operatorNS, edge, h); err != nil {
		t.Fatal(err)
	}
	if got, err = Read(cm, operatorNS, edge); err != nil {
		t.Fatal(err)
	}
	if s, ok := got.Staged(); !ok || s.Version != prev.Version || got.Find(other.Version) != nil {
		t.Errorf("kept %s; previous %v", got.String(), ok)
	}
}

// randomText is n bytes of base64 text that gzip cannot shrink much.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n*3/4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}
