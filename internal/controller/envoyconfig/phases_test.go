package envoyconfig

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history/store"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// historyOf is a fleet's history that serves current, among versions (each
// rejected when its name says so).
func historyOf(current string, versions ...string) publish.History {
	h := publish.History{Current: current}
	for _, v := range versions {
		r := publish.Revision{Version: v}
		if v == "rejected" {
			r.Rejected = "bad listener"
		}
		h.Revisions = append(h.Revisions, r)
	}
	return h
}

// withheld is h withholding a change that version was attributed to.
func withheld(h publish.History, version string) publish.History {
	h.Withheld = map[string]translate.Withheld{"ns/c": {Content: "x", Version: version, Detail: "bad listener"}}
	return h
}

// What a replica serves follows from the recorded history alone: its
// served revision; for a fleet never configured its empty IR; nothing when
// the history says nothing is; and no change while the history cannot be
// read.
func TestServingOf(t *testing.T) {
	tests := []struct {
		name                 string
		h                    publish.History
		readable, unrecorded bool
		want                 serving
	}{
		{"a served revision", historyOf("v1", "v1"), true, false, serveRevision},
		{"a served revision adopted from a legacy history", historyOf("v1", "v1"), false, false, serveRevision},
		{"a fleet never configured", publish.History{}, false, true, serveIR},
		{"nothing served, as recorded", historyOf("", "rejected"), true, false, serveNothing},
		{"a history missing or unreadable", publish.History{}, false, false, keepServing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := servingOf(tt.h, tt.readable, tt.unrecorded); got != tt.want {
				t.Errorf("servingOf = %d, want %d", got, tt.want)
			}
		})
	}
}

// A failed write of the history ends the reconcile before anything is
// served only when the cache was behind (decide again, soon) or the
// operator's namespace goes; any other failure is served around and
// reported.
func TestRecordingEnds(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
	}}
	tests := []struct {
		name    string
		err     error
		ends    bool
		want    ctrl.Result
		clashed bool
	}{
		{"recorded", nil, false, ctrl.Result{}, false},
		{"the cache behind", fmt.Errorf("%w: %w", store.ErrCacheBehind, apierrors.NewConflict(cm, "h", errors.New("changed"))), true, ctrl.Result{RequeueAfter: status.ConflictRetry}, false},
		{"the operator's namespace goes", terminating, true, ctrl.Result{}, false},
		{"another's ConfigMap has the name", apierrors.NewAlreadyExists(cm, "h"), false, ctrl.Result{}, true},
		{"refused", apierrors.NewForbidden(cm, "h", errors.New("no")), false, ctrl.Result{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := recording{err: tt.err}
			got, ends := rec.ends()
			if ends != tt.ends || got != tt.want || rec.clashed() != tt.clashed {
				t.Errorf("ends = %+v, %v; clashed %v; want %+v, %v; clashed %v", got, ends, rec.clashed(), tt.want, tt.ends, tt.clashed)
			}
		})
	}
}

// What every EnvoyConfig of a fleet is told: the served version, the
// proxies' rejection of the IR's version and whether an earlier one is
// served instead, a rejection of the served one, and why the decision
// could not be recorded.
func TestFleetState(t *testing.T) {
	acks := publish.Acks{Connected: 2, Acked: 1, Nacked: 1, LastNACK: "bad"}
	ir := func(version string) translate.IR { return translate.IR{Version: version, Held: []string{"held"}} }
	cm := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name string
		ir   translate.IR
		rec  recording
		want State
	}{
		{"published", ir("v2"), recording{history: historyOf("v2", "v2", "v1")},
			State{PublishedVersion: "v2"}},
		{"the IR's version rejected, an earlier one served", ir("rejected"), recording{history: historyOf("v1", "v1", "rejected")},
			State{PublishedVersion: "v1", Rejected: "bad listener", RejectedVersion: "rejected", RolledBack: true, Unattributed: true}},
		{"the IR's version rejected, nothing served", ir("rejected"), recording{history: historyOf("", "rejected")},
			State{Rejected: "bad listener", RejectedVersion: "rejected", Unattributed: true}},
		{"the IR's version rejected and attributed: a change withheld", ir("rejected"), recording{history: withheld(historyOf("v1", "v1", "rejected"), "rejected")},
			State{PublishedVersion: "v1", Rejected: "bad listener", RejectedVersion: "rejected", RolledBack: true}},
		{"the served version rejected, nothing to go back to", ir("v3"), recording{history: historyOf("rejected", "rejected")},
			State{PublishedVersion: "rejected", ServedRejected: "bad listener"}},
		{"refused", ir("v2"), recording{history: historyOf("v1", "v1"), err: apierrors.NewForbidden(cm, "h", errors.New("no"))},
			State{PublishedVersion: "v1", PublishError: &conditions.Problem{Reason: string(metav1.StatusReasonForbidden),
				Message: `recording the fleet's revision in ConfigMap ns/h: configmaps "h" is forbidden: no`}}},
		{"another's ConfigMap has the name", ir("v2"), recording{err: apierrors.NewAlreadyExists(cm, "h")},
			State{PublishError: &conditions.Problem{Reason: conditions.ResourceExists,
				Message: `recording the fleet's revision in ConfigMap ns/h: configmaps "h" already exists`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Held, tt.want.Proxies, tt.want.EnvoyMissing = []string{"held"}, acks, true
			if got := fleetState(tt.ir, tt.rec, acks, true, "ConfigMap ns/h"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("fleetState =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
