package conditions

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func cond(status metav1.ConditionStatus, reason string) []metav1.Condition {
	return []metav1.Condition{{Type: Degraded, Status: status, Reason: reason, Message: "m"}}
}

func TestBecameTrue(t *testing.T) {
	tests := []struct {
		name          string
		before, after []metav1.Condition
		want          bool
	}{
		{"absent to True", nil, cond("True", "A"), true},
		{"False to True", cond("False", AsExpected), cond("True", "A"), true},
		{"True to True, same reason", cond("True", "A"), cond("True", "A"), false},
		{"True to True, new reason", cond("True", "A"), cond("True", "B"), true},
		{"True to False", cond("True", "A"), cond("False", AsExpected), false},
		{"absent", nil, nil, false},
	}
	for _, tt := range tests {
		if got := BecameTrue(tt.before, tt.after, Degraded); got != tt.want {
			t.Errorf("%s: BecameTrue = %v, want %v", tt.name, got, tt.want)
		}
	}
	// A changed message alone is not news.
	before, after := cond("True", "A"), cond("True", "A")
	after[0].Message = "3 of 4"
	if BecameTrue(before, after, Degraded) {
		t.Errorf("a new message with the same reason must not count as becoming True")
	}
}

func TestSetKeepsTransitionTimeAndTruncates(t *testing.T) {
	var conds []metav1.Condition
	Set(&conds, 1, Ready, metav1.ConditionTrue, "R", "ok")
	first := conds[0].LastTransitionTime
	Set(&conds, 2, Ready, metav1.ConditionTrue, "R", "still ok")
	if conds[0].LastTransitionTime != first || conds[0].ObservedGeneration != 2 || conds[0].Message != "still ok" {
		t.Errorf("condition = %+v", conds[0])
	}
	Set(&conds, 2, Ready, metav1.ConditionFalse, "R", strings.Repeat("é", MaxMessage))
	if m := conds[0].Message; len(m) > MaxMessage || !utf8.ValidString(m) || !strings.HasSuffix(m, "…") {
		t.Errorf("message of %d bytes, valid UTF-8 %v", len(m), utf8.ValidString(m))
	}
}

func TestFromError(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	tests := []struct {
		err    error
		reason string
	}{
		{nil, ""},
		{apierrors.NewForbidden(gr, "d", errors.New(`exceeded quota: q`)), "Forbidden"},
		{fmt.Errorf("creating Deployment %q: %w", "d", apierrors.NewInvalid(schema.GroupKind{Kind: "Deployment"}, "d", nil)), "Invalid"},
		{errors.New("connection refused"), ReconcileError},
	}
	for _, tt := range tests {
		p := FromError(tt.err)
		if tt.err == nil {
			if p != nil {
				t.Errorf("FromError(nil) = %+v", p)
			}
			continue
		}
		if p.Reason != tt.reason || p.Message != tt.err.Error() {
			t.Errorf("FromError(%v) = %+v, want reason %s", tt.err, p, tt.reason)
		}
	}
}

func TestSetFromDeployment(t *testing.T) {
	dep := func(gen, observed int64, replicas, updated, available int32) *appsv1.Deployment {
		d := &appsv1.Deployment{Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available}}
		d.Name, d.Generation = "d", gen
		return d
	}
	problem := &Problem{Reason: ResourceExists, Message: "taken"}
	tests := []struct {
		name                        string
		d                           *appsv1.Deployment
		problem                     *Problem
		available, progressing      metav1.ConditionStatus
		availReason, progressReason string
	}{
		{"not created yet", nil, nil, "False", "True", DeploymentMissing, DeploymentMissing},
		{"cannot be created", nil, problem, "False", "False", DeploymentMissing, ResourceExists},
		{"rolling out", dep(1, 1, 3, 1, 1), nil, "False", "True", MinimumReplicasUnavailable, RollingOut},
		{"new template not observed", dep(2, 1, 3, 3, 3), nil, "True", "True", MinimumReplicasAvailable, RollingOut},
		{"rolled out", dep(1, 1, 3, 3, 3), nil, "True", "False", MinimumReplicasAvailable, RolledOut},
	}
	for _, tt := range tests {
		var conds []metav1.Condition
		SetFromDeployment(&conds, 7, "d", tt.d, 3, "replicas", tt.problem)
		a, p := meta.FindStatusCondition(conds, Available), meta.FindStatusCondition(conds, Progressing)
		if a.Status != tt.available || a.Reason != tt.availReason || p.Status != tt.progressing || p.Reason != tt.progressReason {
			t.Errorf("%s: Available %s/%s, Progressing %s/%s", tt.name, a.Status, a.Reason, p.Status, p.Reason)
		}
		if a.ObservedGeneration != 7 || p.ObservedGeneration != 7 {
			t.Errorf("%s: observedGeneration not set", tt.name)
		}
	}
}
