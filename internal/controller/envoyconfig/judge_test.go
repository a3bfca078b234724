package envoyconfig

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// judgeWorld is a fleet of two EnvoyConfigs, one of whose content a
// revision of its history holds.
func judgeWorld() (*world, []*examplev1.EnvoyConfig) {
	recorded, changed := newConfig("ns", "recorded", cluster("a", "1s")), newConfig("ns", "changed", cluster("b", "1s"))
	w := &world{configs: []*examplev1.EnvoyConfig{recorded, changed}}
	for _, c := range w.configs {
		w.current = append(w.current, translate.FromObject(c))
	}
	w.stored.History = publish.History{Current: "v1", Revisions: []publish.Revision{{Version: "v1", Configs: []translate.Config{w.current[0].Recorded()}}}}
	return w, w.configs
}

// The leader loads in Envoy only content that no revision of the history
// holds; what it does not load in time is refused, saying so, and judged
// again later.
func TestJudgeOnlyWhatIsNotRecorded(t *testing.T) {
	ctx := context.Background()
	w, configs := judgeWorld()
	r := &Reconciler{Envoy: envoyjudge.New(ctx, envoyjudge.Options{Envoy: realenvoy.Stalling(t), Concurrency: 1, Timeout: 100 * time.Millisecond})}
	in := w.input(r.Policy)
	ir, retry := r.judge(ctx, w, in, translate.Translate(in))
	if r.Envoy.Runs() != 1 {
		t.Errorf("Envoy ran %d times; want once, for the content no revision holds", r.Envoy.Runs())
	}
	recorded, changed := ir.Configs["ns/recorded"], ir.Configs["ns/changed"]
	if recorded.EnvoyRefused != "" || recorded.EnvoyUnjudged != "" || recorded.Choice != translate.ChoiceCurrent {
		t.Errorf("recorded content: %+v; want it served, unjudged by Envoy", recorded)
	}
	if !strings.Contains(changed.EnvoyRefused, "Envoy did not finish loading it within 100ms") || changed.Choice != translate.ChoiceNone || !retry {
		t.Errorf("changed content: %+v, retry %v; want it refused for the timeout, and judged again", changed, retry)
	}
	st := Status(configs[1], State{Config: changed})
	if a := condition(&examplev1.EnvoyConfig{Status: st}, examplev1.EnvoyConfigConditionAccepted); a.Status != metav1.ConditionFalse || a.Reason != examplev1.EnvoyConfigReasonRefusedByEnvoy {
		t.Errorf("Accepted: %+v", a)
	}
}

// Without an Envoy, every content the fleet would serve is served on the
// rules alone, and its Accepted condition says it was not loaded in a
// real Envoy, and why.
func TestJudgeWithoutEnvoy(t *testing.T) {
	ctx := context.Background()
	w, configs := judgeWorld()
	r := &Reconciler{Envoy: envoyjudge.New(ctx, envoyjudge.Options{Envoy: "no-such-envoy", Concurrency: 1, Timeout: time.Second})}
	in := w.input(r.Policy)
	ir, retry := r.judge(ctx, w, in, translate.Translate(in))
	if retry || r.Envoy.Runs() != 0 {
		t.Errorf("retry %v, %d runs of Envoy; want neither", retry, r.Envoy.Runs())
	}
	for i, c := range w.current {
		st := ir.Configs[c.Name]
		if st.Choice != translate.ChoiceCurrent || !strings.Contains(st.EnvoyUnjudged, "no Envoy to load EnvoyConfigs in (--envoy-path no-such-envoy)") {
			t.Errorf("%s: %+v; want it served, unjudged, saying why", c.Name, st)
		}
		a := condition(&examplev1.EnvoyConfig{Status: Status(configs[i], State{Config: st})}, examplev1.EnvoyConfigConditionAccepted)
		if a.Status != metav1.ConditionTrue || !strings.Contains(a.Message, "it was not loaded in a real Envoy: no Envoy to load EnvoyConfigs in") {
			t.Errorf("%s: Accepted %s %q", c.Name, a.Status, a.Message)
		}
	}
	// A reconciler given no judge at all says so too.
	ir, _ = (&Reconciler{}).judge(ctx, w, in, translate.Translate(in))
	for _, c := range w.current {
		if st := ir.Configs[c.Name]; st.Choice != translate.ChoiceCurrent || st.EnvoyUnjudged != "no Envoy was configured to load it in" {
			t.Errorf("without a judge, %s: %+v", c.Name, st)
		}
	}
}
