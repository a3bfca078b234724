package publish

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/runtime"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

func ir(version string) translate.IR {
	return translate.IR{Version: version, Revision: []translate.Config{{Name: "ns/" + version}}}
}

func rev(version string, acked bool, rejected string) Revision {
	r := Revision{Version: version, Acked: acked, Rejected: rejected}
	if rejected == "" {
		r.Configs = []translate.Config{{Name: "ns/" + version}}
	}
	return r
}

// known is the rejections recorded outside the history.
func known(versions ...string) Rejections {
	out := Rejections{}
	for _, v := range versions {
		out[v] = true
	}
	return out
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		prev     History
		ir       string
		acks     Acks
		rejected Rejections
		action   Action
		want     string
		event    string
	}{
		{"first publish", History{}, "v1", Acks{}, nil, Publish, "v1*", ""},
		{"nothing new, no proxies", History{Current: "v1", Revisions: []Revision{rev("v1", false, "")}}, "v1", Acks{}, nil, Unchanged, "v1*", ""},
		{"every proxy acked: marked", History{Current: "v1", Revisions: []Revision{rev("v1", false, "")}}, "v1",
			Acks{Connected: 3, Acked: 3}, nil, Unchanged, "v1*+", ""},
		{"some acked: not marked", History{Current: "v1", Revisions: []Revision{rev("v1", false, "")}}, "v1",
			Acks{Connected: 3, Acked: 2}, nil, Unchanged, "v1*", ""},
		{"a new version is published", History{Current: "v1", Revisions: []Revision{rev("v1", true, "")}}, "v2",
			Acks{Connected: 3, Acked: 3}, nil, Publish, "v2* v1+", ""},
		{"every proxy rejected: roll back", History{Current: "v2", Revisions: []Revision{rev("v2", false, ""), rev("v1", true, "")}}, "v2",
			Acks{Connected: 2, Nacked: 2, LastNACK: "bad cluster"}, nil, RollBack, "v1*+ v2!", "RolledBack"},
		{"some rejected: no rollback", History{Current: "v2", Revisions: []Revision{rev("v2", false, ""), rev("v1", true, "")}}, "v2",
			Acks{Connected: 2, Nacked: 1, Acked: 1}, nil, Unchanged, "v2* v1+", ""},
		{"proxies of a lagging replica have not answered: no rollback", History{Current: "v2", Revisions: []Revision{rev("v2", false, ""), rev("v1", true, "")}}, "v2",
			Acks{Connected: 3, Nacked: 2}, nil, Unchanged, "v2* v1+", ""},
		{"rejected after it was acked: no rollback", History{Current: "v2", Revisions: []Revision{rev("v2", true, ""), rev("v1", true, "")}}, "v2",
			Acks{Connected: 2, Nacked: 2}, nil, Unchanged, "v2*+ v1+", ""},
		{"rejected with nothing to go back to: stays served, marked", History{Current: "v1", Revisions: []Revision{rev("v1", false, "")}}, "v1",
			Acks{Connected: 1, Nacked: 1, LastNACK: "no"}, nil, Unchanged, "v1*!", "Rejected"},
		{"after a rollback the rejected content is held", History{Current: "v1", Revisions: []Revision{rev("v1", true, ""), rev("v2", false, "bad")}}, "v2",
			Acks{Connected: 2, Acked: 2}, nil, Hold, "v1*+ v2!", ""},
		{"restart after a rollback: same decision from the recorded history", History{Current: "v1", Revisions: []Revision{rev("v1", true, ""), rev("v2", false, "bad")}}, "v2",
			Acks{}, nil, Hold, "v1*+ v2!", ""},
		{"changed content after a rollback is published", History{Current: "v1", Revisions: []Revision{rev("v1", true, ""), rev("v2", false, "bad")}}, "v3",
			Acks{Connected: 2, Acked: 2}, nil, Publish, "v3* v1+ v2!", ""},
		{"back to an older acked content keeps its mark", History{Current: "v2", Revisions: []Revision{rev("v2", true, ""), rev("v1", true, "")}}, "v1",
			Acks{}, nil, Publish, "v1*+ v2+", ""},
		{"rollback and a new version at once: the new one is published", History{Current: "v2", Revisions: []Revision{rev("v2", false, ""), rev("v1", true, "")}}, "v3",
			Acks{Connected: 1, Nacked: 1}, nil, RollBack, "v3* v1+ v2!", "RolledBack"},
		{"history is bounded, the rollback target kept",
			History{Current: "v6", Revisions: []Revision{rev("v6", false, ""), rev("v5", false, ""), rev("v4", false, ""), rev("v3", false, ""), rev("v2", false, ""), rev("v1", true, "")}},
			"v7", Acks{}, nil, Publish, "v7* v6 v5 v4 v1+", ""},
		// The history lost, or read back unusable: the EnvoyConfigs' status
		// still knows what was rejected.
		{"history lost after a rollback: the rejected content is held, nothing served", History{}, "v2",
			Acks{}, known("v2"), Hold, "v2!", ""},
		{"history lost, the content changed since: published", History{}, "v3",
			Acks{}, known("v2"), Publish, "v3*", ""},
		{"a known rejection the history lacks is held", History{Current: "v1", Revisions: []Revision{rev("v1", true, "")}}, "v2",
			Acks{Connected: 1, Acked: 1}, known("v2"), Hold, "v1*+ v2!", ""},
		{"a known rejection of the served revision marks it, and it stays served", History{Current: "v1", Revisions: []Revision{rev("v1", false, "")}}, "v1",
			Acks{}, known("v1"), Unchanged, "v1*!", ""},
		{"the history knows better of a revision every proxy accepted", History{Current: "v2", Revisions: []Revision{rev("v2", true, ""), rev("v1", true, "")}}, "v1",
			Acks{}, known("v1"), Publish, "v1*+ v2+", ""},
		{"a known rejection of an older revision takes its content away", History{Current: "v2", Revisions: []Revision{rev("v2", true, ""), rev("v1", false, "")}}, "v1",
			Acks{}, known("v1"), Hold, "v2*+ v1!", ""},
		{"a full history keeps the rejected revision offered",
			History{Current: "v5", Revisions: []Revision{rev("v5", true, ""), rev("v4", false, ""), rev("v3", false, ""), rev("v2", false, ""), rev("v1", false, "")}},
			"v9", Acks{}, known("v9"), Hold, "v5*+ v4 v3 v2 v9!", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.prev.String()
			d := Decide(tt.prev, ir(tt.ir), tt.acks, tt.rejected)
			if d.Action != tt.action || d.History.String() != tt.want {
				t.Errorf("got %s %q, want %s %q", d.Action, d.History.String(), tt.action, tt.want)
			}
			if tt.prev.String() != before {
				t.Errorf("Decide changed its input history: %q, was %q", tt.prev.String(), before)
			}
			var reasons []string
			for _, e := range d.Events {
				reasons = append(reasons, e.Reason)
			}
			if got := strings.Join(reasons, ","); got != tt.event {
				t.Errorf("events %q, want %q", got, tt.event)
			}
			for _, r := range d.History.Revisions {
				if r.Rejected != "" && r.Version != d.History.Current && r.Configs != nil {
					t.Errorf("rejected revision %s, not served, still holds content", r.Version)
				}
				if r.Version == d.History.Current && r.Configs == nil {
					t.Errorf("the served revision %s holds no content", r.Version)
				}
			}
		})
	}
}

// A decision that changes nothing asks for no write.
func TestDecisionChanged(t *testing.T) {
	h := History{Current: "v1", Revisions: []Revision{rev("v1", true, "")}}
	if d := Decide(h, ir("v1"), Acks{Connected: 1, Acked: 1}, nil); d.Changed(h) {
		t.Error("a settled fleet's decision changed the history")
	}
	if d := Decide(h, ir("v2"), Acks{}, nil); !d.Changed(h) {
		t.Error("a publish did not change the history")
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", 3<<20)
	got := Truncate(long)
	if len(got) > MaxDetail || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("Truncate gave %d bytes", len(got))
	}
	if Truncate("short") != "short" {
		t.Error("a short detail was cut")
	}
}

// clusters is EnvoyConfig ns/name of fleet edge with EDS clusters of names.
func clusters(name string, names ...string) translate.Config {
	var cs []runtime.RawExtension
	for _, n := range names {
		cs = append(cs, runtime.RawExtension{Raw: []byte(`{"name": "` + n + `", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}}}}`)})
	}
	return translate.Config{Name: "ns/" + name, Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", Resources: examplev1.EnvoyResources{Clusters: cs}}}
}

// translated is the IR the leader makes of configs over history h.
func translated(h History, configs ...translate.Config) translate.IR {
	var published []translate.Config
	if r := h.Served(); r != nil {
		published = r.Configs
	}
	return translate.Translate(translate.Input{Configs: configs, Published: published, Withheld: h.Withheld})
}

// A rejection stays with its author: the change every proxy rejected is
// attributed to the EnvoyConfig that made it, and withheld, so that the
// others' later changes are published; the author's next change is
// published again. A rejection that cannot be attributed holds the fleet's
// revision whole, as before.
func TestDecideWithholdsTheRejectedChange(t *testing.T) {
	A, B := clusters("a", "a1"), clusters("b", "b1")
	A2, B2, A3 := clusters("a", "a1", "extra"), clusters("b", "b1", "b2"), clusters("a", "a1", "a3")
	everyProxyRejects := Acks{Connected: 2, Nacked: 2, LastNACK: "cluster extra: unsupported", LastNACKType: resourcev3.ClusterType, LastNACKNode: "pod-1"}

	v1 := translated(History{}, A, B)
	h := Decide(History{Fleet: "ns/edge"}, v1, Acks{}, nil).History
	h = Decide(h, v1, Acks{Connected: 2, Acked: 2}, nil).History
	v2 := translated(h, A2, B)
	h = Decide(h, v2, Acks{}, nil).History
	if h.Current != v2.Version {
		t.Fatalf("A's change is not published: %s", h.String())
	}

	d := Decide(h, v2, everyProxyRejects, nil)
	h = d.History
	if d.Action != RollBack || h.Current != v1.Version || !slices.Equal(d.Withheld, []string{"ns/a"}) {
		t.Fatalf("after every proxy rejected A's change: %s %s, withheld %v", d.Action, h.String(), d.Withheld)
	}
	want := translate.Withheld{Content: translate.ContentOf(A2), Version: v2.Version, TypeURL: resourcev3.ClusterType, Detail: "cluster extra: unsupported", Node: "pod-1", Previous: &A}
	if got := h.Withheld["ns/a"]; !reflect.DeepEqual(got, want) || len(h.Withheld) != 1 {
		t.Errorf("withheld %+v, want only A's: %+v", h.Withheld, want)
	}
	if !strings.Contains(d.Message, "attributed to EnvoyConfig ns/a") {
		t.Errorf("the rollback's message does not say to whom it is attributed: %s", d.Message)
	}

	// B changes: published, without A's change, which stays withheld.
	v3 := translated(h, A2, B2)
	d = Decide(h, v3, Acks{Connected: 2, Acked: 2}, nil)
	h = d.History
	if d.Action != Publish || h.Current != v3.Version || v3.Version == v2.Version {
		t.Fatalf("B's change: %s %s", d.Action, h.String())
	}
	if got := v3.Revision; len(got) != 2 || translate.ContentOf(got[0]) != translate.ContentOf(A) || translate.ContentOf(got[1]) != translate.ContentOf(B2) {
		t.Errorf("the revision published with B's change holds %+v, want A's accepted content and B's new one", got)
	}
	if _, ok := h.Withheld["ns/a"]; !ok {
		t.Errorf("A's change is no longer withheld after B's was published")
	}

	// A changes again: published, and nothing is withheld any more.
	v4 := translated(h, A3, B2)
	d = Decide(h, v4, Acks{}, nil)
	if d.Action != Publish || d.History.Current != v4.Version || d.History.Withheld != nil {
		t.Errorf("A's next change: %s %s, withheld %v", d.Action, d.History.String(), d.History.Withheld)
	}

	// A rejection of what no EnvoyConfig changed (endpoints) cannot be
	// attributed: the revision is held whole.
	d = Decide(d.History, v4, Acks{Connected: 2, Nacked: 2, LastNACK: "bad endpoints", LastNACKType: resourcev3.EndpointType}, nil)
	if len(d.Withheld) != 0 || d.History.Withheld != nil || !strings.Contains(d.Message, "cannot be attributed") {
		t.Errorf("an unattributable rejection: withheld %v %v, message %q", d.Withheld, d.History.Withheld, d.Message)
	}
	if next := Decide(d.History, translated(d.History, A3, B2), Acks{}, nil); next.Action != Hold {
		t.Errorf("after an unattributable rejection: %s, want Hold", next.Action)
	}
}

// When no revision was recorded as accepted yet (the proxies' ACKs were
// not reported before the next change), a rejected change is attributed
// against the revision published before it, and the EnvoyConfig gets its
// content from there: the fleet is served what it was before the change.
func TestDecideWithholdsWithoutAnAcceptedRevision(t *testing.T) {
	A, B, A2 := clusters("a", "a1"), clusters("b", "b1"), clusters("a", "a1", "extra")
	v1 := translated(History{}, A, B)
	h := Decide(History{Fleet: "ns/edge"}, v1, Acks{}, nil).History
	v2 := translated(h, A2, B)
	h = Decide(h, v2, Acks{}, nil).History
	d := Decide(h, v2, Acks{Connected: 2, Nacked: 2, LastNACK: "cluster extra: no", LastNACKType: resourcev3.ClusterType}, nil)
	if d.Action != Unchanged || d.History.Current != v2.Version || !slices.Equal(d.Withheld, []string{"ns/a"}) {
		t.Fatalf("every proxy rejected A's change, none accepted a revision: %s %s, withheld %v", d.Action, d.History.String(), d.Withheld)
	}
	next := translated(d.History, A2, B)
	if next.Version != v1.Version {
		t.Errorf("with A's change withheld the fleet's content is %s, want what it was before the change, %s", next.Version, v1.Version)
	}
	if d = Decide(d.History, next, Acks{}, nil); d.Action != Publish || d.History.Current != v1.Version {
		t.Errorf("then: %s %s, want %s published", d.Action, d.History.String(), v1.Version)
	}
}

// A proxy's error_detail is kept without the white space around it: Envoy
// ends some of its messages with a newline, which would break a status
// message in two.
func TestTruncateTrims(t *testing.T) {
	if got := Truncate("cannot bind: Address already in use\n"); got != "cannot bind: Address already in use" {
		t.Errorf("Truncate = %q", got)
	}
	if got := Truncate(strings.Repeat("x", 2*MaxDetail)); len(got) > MaxDetail {
		t.Errorf("Truncate kept %d bytes, want at most %d", len(got), MaxDetail)
	}
}
