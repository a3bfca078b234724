package envoyconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/vocabulary"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// statusOf returns an EnvoyConfig of generation 2 whose status was written
// for its content as it is (unchanged) or before a change, with rejected
// versions and the Published condition's reason.
func statusOf(unchanged bool, published string, rejected []string, reason string) *examplev1.EnvoyConfig {
	c := newConfig("ns", "c", cluster("a", "1s"))
	c.Generation = 2
	c.Status.ContentHash = publish.ContentHash(c)
	if !unchanged {
		c.Status.ContentHash = "before"
	}
	c.Status.PublishedVersion, c.Status.RejectedVersions = published, rejected
	if reason != "" {
		c.Status.Conditions = []metav1.Condition{{Type: examplev1.EnvoyConfigConditionPublished, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: 2}}
	}
	return c
}

func TestVouched(t *testing.T) {
	for want, configs := range map[string][]*examplev1.EnvoyConfig{
		"v1": {statusOf(true, "v1", nil, ""), statusOf(true, "", nil, ""), statusOf(false, "v1", nil, "")},
		"":   {statusOf(true, "v1", nil, ""), statusOf(true, "v2", nil, "")},
	} {
		if got := Vouched(configs); got != want {
			t.Errorf("Vouched = %q, want %q", got, want)
		}
	}
	if got := Vouched(nil); got != "" {
		t.Errorf("Vouched of no EnvoyConfig = %q", got)
	}
}

// Status records the fleet's rejected newest version first, keeps those
// recorded while the content is unchanged, and at most publish.MaxRevisions.
func TestStatusRecordsRejectedVersions(t *testing.T) {
	many := []string{"v1", "v2", "v3", "v4", "v5"}
	tests := []struct {
		name     string
		config   *examplev1.EnvoyConfig
		rejected string
		want     []string
	}{
		{"a rejection", statusOf(true, "v0", nil, ""), "v9", []string{"v9"}},
		{"kept", statusOf(true, "v0", []string{"v8"}, examplev1.EnvoyConfigReasonRolledBack), "", []string{"v8"}},
		{"added, newest first", statusOf(true, "v0", []string{"v8"}, examplev1.EnvoyConfigReasonRolledBack), "v9", []string{"v9", "v8"}},
		{"once", statusOf(true, "v0", []string{"v9"}, examplev1.EnvoyConfigReasonRolledBack), "v9", []string{"v9"}},
		{"forgotten when the content changes", statusOf(false, "v0", []string{"v8"}, examplev1.EnvoyConfigReasonRolledBack), "", nil},
		{"bounded", statusOf(true, "v0", many, examplev1.EnvoyConfigReasonRolledBack), "v9", append([]string{"v9"}, many[:publish.MaxRevisions-1]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Status(tt.config, State{PublishedVersion: "v0", Rejected: "bad", RejectedVersion: tt.rejected}).RejectedVersions
			if !slices.Equal(got, tt.want) {
				t.Errorf("rejectedVersions = %v, want %v", got, tt.want)
			}
		})
	}
}

// Every condition Status sets, in every outcome, has a type and a reason that
// the API package exports for EnvoyConfig, where clients find them.
func TestStatusReasonsExported(t *testing.T) {
	current := translate.ConfigStatus{Choice: translate.ChoiceCurrent}
	with := func(f func(*translate.ConfigStatus)) translate.ConfigStatus {
		cs := current
		f(&cs)
		return cs
	}
	refused := conditions.FromError
	tests := []struct {
		name        string
		state       State
		typ, reason string
	}{
		{"served", State{Config: current, PublishedVersion: "v1"}, examplev1.EnvoyConfigConditionPublished, examplev1.EnvoyConfigReasonPublished},
		{"not served", State{}, examplev1.EnvoyConfigConditionPublished, examplev1.EnvoyConfigReasonNotPublished},
		{"refused by the policy", State{Config: with(func(cs *translate.ConfigStatus) { cs.Refused = []string{"x"} })}, examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigReasonPolicyViolation},
		{"invalid", State{Config: translate.ConfigStatus{Invalid: []string{"x"}}}, examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigReasonInvalidResources},
		{"dangling, not served", State{Config: translate.ConfigStatus{Dangling: []string{"x"}}}, examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigReasonReferencesMissing},
		{"dangling, served", State{Config: with(func(cs *translate.ConfigStatus) { cs.Dangling = []string{"x"} })}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonReferencesMissing},
		{"held", State{Held: []string{"x"}}, examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigReasonHeld},
		{"rolled back", State{Config: current, Rejected: "bad", RolledBack: true}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonRolledBack},
		{"rejected", State{Config: current, Rejected: "bad", PublishedVersion: "v1"}, examplev1.EnvoyConfigConditionPublished, examplev1.EnvoyConfigReasonRejected},
		{"rejected, nothing accepted", State{Config: current, Rejected: "bad"}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonRejected},
		{"served version rejected", State{Config: current, ServedRejected: "bad"}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonRejected},
		{"not recorded", State{Config: current, PublishError: refused(errors.New("broken"))}, examplev1.EnvoyConfigConditionPublished, examplev1.EnvoyConfigReasonPublishFailed},
		{"recording refused", State{Config: current, PublishError: refused(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "h", errors.New("no")))}, examplev1.EnvoyConfigConditionDegraded, string(metav1.StatusReasonForbidden)},
		{"recording failed", State{Config: current, PublishError: refused(errors.New("broken"))}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonReconcileError},
		{"recording's name taken", State{Config: current, PublishError: &conditions.Problem{Reason: examplev1.EnvoyConfigReasonErrResourceExists, Message: "taken"}}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonErrResourceExists},
		{"nacked", State{Config: current, Proxies: publish.Acks{Connected: 2, Nacked: 1}}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonNacked},
		{"name clash", State{Config: with(func(cs *translate.ConfigStatus) { cs.Clashes = []string{"x"} })}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonNameClash},
		{"secret unavailable", State{Config: with(func(cs *translate.ConfigStatus) { cs.Secrets = []string{"x"} })}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonSecretUnavailable},
		{"no endpoint port", State{Config: with(func(cs *translate.ConfigStatus) { cs.Endpoints = []string{"x"} })}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonNoEndpointPort},
		{"inline private key", State{Config: with(func(cs *translate.ConfigStatus) { cs.InlineKeys = []string{"x"} })}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonInlinePrivateKey},
		{"no Envoy", State{Config: current, EnvoyMissing: true}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonEnvoyNotFound},
		{"as expected", State{Config: current}, examplev1.EnvoyConfigConditionDegraded, examplev1.EnvoyConfigReasonAsExpected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConfig("ns", "c", cluster("a", "1s"))
			st := Status(c, tt.state)
			vocabulary.Check(t, c, st.Conditions)
			if got := conditions.Reason(st.Conditions, tt.typ); got != tt.reason {
				t.Errorf("%s reason = %q, want %q", tt.typ, got, tt.reason)
			}
		})
	}
}

// A rejection that no EnvoyConfig's change explains withholds nothing: the
// EnvoyConfigs are told so; one that was attributed is not said to be
// unattributed, and the one whose change is withheld says that instead.
func TestUnattributedRejection(t *testing.T) {
	c := statusOf(true, "v1", nil, "")
	h := publish.History{Current: "v1", Revisions: []publish.Revision{{Version: "v1", Acked: true}, {Version: "v2", Rejected: "bad endpoints"}},
		Withheld: map[string]translate.Withheld{}}
	ir := translate.IR{Version: "v2", Configs: map[string]translate.ConfigStatus{}}
	degraded := func(h publish.History, cs translate.ConfigStatus) metav1.Condition {
		s := fleetState(ir, recording{history: h, readable: true}, publish.Acks{}, false, "")
		s.Config = cs
		st := Status(c, s)
		return *meta.FindStatusCondition(st.Conditions, examplev1.EnvoyConfigConditionDegraded)
	}
	if d := degraded(h, translate.ConfigStatus{Choice: translate.ChoiceCurrent}); d.Reason != examplev1.EnvoyConfigReasonRolledBack || !strings.Contains(d.Message, "no EnvoyConfig's change explains the rejection") {
		t.Errorf("an unattributed rejection: %+v", d)
	}
	h.Withheld["ns/c"] = translate.Withheld{Content: "x", Version: "v2", Detail: "bad cluster", Node: "pod-1"}
	if d := degraded(h, translate.ConfigStatus{Choice: translate.ChoiceCurrent}); d.Reason != examplev1.EnvoyConfigReasonRolledBack || strings.Contains(d.Message, "no EnvoyConfig's change explains") {
		t.Errorf("an attributed rejection, for another EnvoyConfig: %+v", d)
	}
	w := h.Withheld["ns/c"]
	if d := degraded(h, translate.ConfigStatus{Choice: translate.ChoiceNone, Withheld: &w}); d.Reason != examplev1.EnvoyConfigReasonWithheld || !strings.Contains(d.Message, `proxy "pod-1": bad cluster`) {
		t.Errorf("the EnvoyConfig whose change is withheld: %+v", d)
	}
}

// A rollout aborted by its step's figures: the other EnvoyConfigs' Published
// and Degraded conditions say RolloutAborted with the proxy, the metric, its
// value and the threshold; the author's, whose change is withheld, say so
// with the same figures.
func TestStatusOfAnalysisAbort(t *testing.T) {
	c := statusOf(true, "v1", nil, "")
	detail := "proxy edge-abc-1 http:ingress: 5xx-ratio 62.00%, above the ceiling of 5.00%"
	aborted := publish.Rollout{Revision: "v2", Previous: "v1", Phase: publish.RolloutAborted,
		Aborted: &publish.RolloutAbort{Proxy: "edge-abc-1", Scope: "http:ingress", Metric: "5xx-ratio", Value: 0.62, Threshold: 0.05, Detail: detail}}
	s := State{PublishedVersion: "v2", Rollout: &RolloutState{Rollout: aborted, Proxies: 3}, Config: translate.ConfigStatus{Choice: translate.ChoiceCurrent}}
	st := Status(c, s)
	for _, typ := range []string{examplev1.EnvoyConfigConditionPublished, examplev1.EnvoyConfigConditionDegraded} {
		got := meta.FindStatusCondition(st.Conditions, typ)
		if got == nil || got.Reason != examplev1.EnvoyConfigReasonRolloutAborted || !strings.Contains(got.Message, "its analysis failed: "+detail) {
			t.Errorf("%s = %+v", typ, got)
		}
	}
	if st.Rollout == nil || !strings.Contains(st.Rollout.Message, detail) {
		t.Errorf("status.rollout = %+v", st.Rollout)
	}
	w := translate.Withheld{Content: "x", Version: "v2", Rollout: true, Analysis: true, Detail: detail, Node: "edge-abc-1"}
	s.Config = translate.ConfigStatus{Choice: translate.ChoicePublished, Withheld: &w}
	st = Status(c, s)
	for _, typ := range []string{examplev1.EnvoyConfigConditionAccepted, examplev1.EnvoyConfigConditionDegraded} {
		got := meta.FindStatusCondition(st.Conditions, typ)
		if got == nil || got.Reason != examplev1.EnvoyConfigReasonWithheld || !strings.Contains(got.Message, "failed its analysis on its first proxies ("+detail+")") {
			t.Errorf("the author's %s = %+v", typ, got)
		}
	}
}
