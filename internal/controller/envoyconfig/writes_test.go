package envoyconfig

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// A decision that only marks a revision accepted writes nothing; the mark
// is known from memory or from the status, and goes with the next write.
func TestAcceptedMarkWaitsForTheNextWrite(t *testing.T) {
	stored := publish.History{Current: "v2", Revisions: []publish.Revision{{Version: "v2"}, {Version: "v1", Acked: true}}}
	marked := publish.History{Current: "v2", Revisions: []publish.Revision{{Version: "v2", Acked: true}, {Version: "v1", Acked: true}}}
	if changedBeyondAccepted(publish.Decision{History: marked}, stored) {
		t.Error("a decision that only marks v2 accepted is a write")
	}
	published := publish.History{Current: "v3", Revisions: append([]publish.Revision{{Version: "v3"}}, marked.Revisions...)}
	if !changedBeyondAccepted(publish.Decision{History: published}, stored) {
		t.Error("a decision that publishes v3 is no write")
	}

	id := fleet.ID{Namespace: "ns", Name: "edge"}
	vouching := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"},
		Status: examplev1.EnvoyConfigStatus{PublishedVersion: "v2", Proxies: examplev1.ProxyStatus{Connected: 3, Acked: 3}}}
	partly := vouching.DeepCopy()
	partly.Status.Proxies.Acked = 2
	for _, c := range []struct {
		what    string
		configs []*examplev1.EnvoyConfig
		noted   *publish.History
		want    bool
	}{
		{"nothing known", nil, nil, false},
		{"a status that says every proxy accepted v2", []*examplev1.EnvoyConfig{vouching}, nil, true},
		{"a status that says some did", []*examplev1.EnvoyConfig{partly}, nil, false},
		{"the leader found it so", nil, &marked, true},
	} {
		var a acceptedMarks
		if c.noted != nil {
			a.note(id, *c.noted)
		}
		h := a.marked(&world{id: id, configs: c.configs}, stored)
		if got := h.Served().Acked; got != c.want {
			t.Errorf("%s: v2 marked accepted %v, want %v", c.what, got, c.want)
		}
		if stored.Revisions[0].Acked {
			t.Fatalf("%s: the stored history was marked", c.what)
		}
	}
	// A revision every proxy rejected is not marked.
	rejected := publish.History{Current: "v2", Revisions: []publish.Revision{{Version: "v2", Rejected: "no"}}}
	if h := new(acceptedMarks).marked(&world{id: id, configs: []*examplev1.EnvoyConfig{vouching}}, rejected); h.Served().Acked {
		t.Error("a rejected revision was marked accepted")
	}
}
