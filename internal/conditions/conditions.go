// Package conditions is where conditions are set and read. Every controller
// reports through it, so that the same situation reads the same on every
// kind: a name taken by a foreign object is always Degraded with reason
// ErrResourceExists, a refused write always names the API server's reason.
//
// Clients find each kind's condition types, condition reasons and event
// reasons in its API package (api/<group>/<version>/conditions.go), and the
// controllers name them from there. The types and reasons below are those
// that several kinds share, as the helpers here (and internal/objects, and
// internal/status) set them; every kind's API package exports them under its
// own name, which the tests check (internal/testing/vocabulary).
//
// Everything here is pure.
package conditions

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types shared by several kinds.
const (
	// Available: the object's workload serves (enough replicas are available).
	Available = "Available"
	// Progressing: the object's workload is moving towards its spec.
	Progressing = "Progressing"
	// Degraded: something stops the operator from making the spec true; the
	// reason and message say what. The operator records a Warning event when
	// an object becomes Degraded (see BecameTrue).
	Degraded = "Degraded"
	// Ready: the object is usable as it is (Watcher).
	Ready = "Ready"
)

// Condition reasons shared by several kinds.
const (
	// AsExpected is the reason of a Degraded condition that is False.
	AsExpected = "AsExpected"
	// ResourceExists: a child's name is taken by an object the owner does
	// not control. The operator never takes such an object over.
	// kubernetes/sample-controller's name for it.
	ResourceExists = "ErrResourceExists"
	// InvalidSpec: the spec cannot be turned into children (admission should
	// have refused it).
	InvalidSpec = "InvalidSpec"
	// ReconcileError: a write failed for a reason the API server did not name.
	ReconcileError = "ReconcileError"

	// The reasons of conditions computed from a Deployment.
	MinimumReplicasAvailable   = "MinimumReplicasAvailable"
	MinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	RollingOut                 = "RollingOut"
	RolledOut                  = "RolledOut"
	DeploymentMissing          = "DeploymentMissing"
)

// Event reasons shared by several kinds. Each kind's own are named in its
// API package.
const (
	// EventCreated, EventUpdated and EventDeleted report the children a
	// reconcile wrote: one event per verb and reconcile. An owner's first
	// children have none; its status tells of them (objects.Children.Report).
	EventCreated = "Created"
	EventUpdated = "Updated"
	EventDeleted = "Deleted"
)

// MaxMessage bounds every condition message: the API allows 32768 bytes, and
// a message built from other components' errors (a proxy's NACK, an
// admission webhook's answer) must never make the status write fail.
const MaxMessage = 4096

// Set sets the condition typ on conds, for generation, keeping its
// lastTransitionTime when its status does not change. The message is cut to
// MaxMessage bytes.
func Set(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            Truncate(message, MaxMessage),
		ObservedGeneration: generation,
	})
}

// SetBool is Set with a bool status.
func SetBool(conds *[]metav1.Condition, generation int64, typ string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	Set(conds, generation, typ, status, reason, message)
}

// IsTrue reports whether the condition typ is present and True.
func IsTrue(conds []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionTrue(conds, typ)
}

// Reason returns the reason of the condition typ, or "" when it is absent.
func Reason(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Reason
	}
	return ""
}

// BecameTrue reports whether the condition typ is True in after and was not
// True in before, or was True for another reason. A True condition whose
// message alone changes (a count in it, say) did not become anything new.
func BecameTrue(before, after []metav1.Condition, typ string) bool {
	now := meta.FindStatusCondition(after, typ)
	if now == nil || now.Status != metav1.ConditionTrue {
		return false
	}
	was := meta.FindStatusCondition(before, typ)
	return was == nil || was.Status != metav1.ConditionTrue || was.Reason != now.Reason
}

// Truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Problem is why an object is Degraded: the reason and message of its
// Degraded condition. A nil *Problem means it is not degraded.
type Problem struct {
	Reason  string
	Message string
}

// SetDegraded sets the Degraded condition from p.
func SetDegraded(conds *[]metav1.Condition, generation int64, p *Problem) {
	if p == nil {
		Set(conds, generation, Degraded, metav1.ConditionFalse, AsExpected, "")
		return
	}
	Set(conds, generation, Degraded, metav1.ConditionTrue, p.Reason, p.Message)
}

// FromError is the Problem of a failed write: the API server's reason for
// refusing it (Forbidden for a quota or Pod Security admission, Invalid, …),
// or ReconcileError when the error is not the API server's.
func FromError(err error) *Problem {
	if err == nil {
		return nil
	}
	reason := ReconcileError
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		reason = string(status.Status().Reason)
	}
	return &Problem{Reason: reason, Message: err.Error()}
}

// DeploymentRolledOut reports whether the Deployment controller has finished
// rolling out d's current template at want replicas, as `kubectl rollout
// status` judges.
func DeploymentRolledOut(d *appsv1.Deployment, want int32) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

// SetFromDeployment sets Available and Progressing from the owner's
// Deployment d, which should run want replicas; noun names them in messages
// ("replicas", "proxies"). A nil d has not been created yet: it is
// Progressing, unless problem says why it cannot be, and not Available.
func SetFromDeployment(conds *[]metav1.Condition, generation int64, name string, d *appsv1.Deployment, want int32, noun string, problem *Problem) {
	if d == nil {
		msg := fmt.Sprintf("Deployment %q does not exist yet", name)
		Set(conds, generation, Available, metav1.ConditionFalse, DeploymentMissing, msg)
		if problem != nil {
			Set(conds, generation, Progressing, metav1.ConditionFalse, problem.Reason, problem.Message)
		} else {
			Set(conds, generation, Progressing, metav1.ConditionTrue, DeploymentMissing, msg)
		}
		return
	}
	s := d.Status
	msg := fmt.Sprintf("Deployment %q has %d of %d %s available", d.Name, s.AvailableReplicas, want, noun)
	if s.AvailableReplicas >= want {
		Set(conds, generation, Available, metav1.ConditionTrue, MinimumReplicasAvailable, msg)
	} else {
		Set(conds, generation, Available, metav1.ConditionFalse, MinimumReplicasUnavailable, msg)
	}
	if DeploymentRolledOut(d, want) {
		Set(conds, generation, Progressing, metav1.ConditionFalse, RolledOut,
			fmt.Sprintf("Deployment %q is rolled out: all %d %s run the current spec", d.Name, want, noun))
	} else {
		Set(conds, generation, Progressing, metav1.ConditionTrue, RollingOut,
			fmt.Sprintf("Deployment %q is rolling out: %d of %d %s updated", d.Name, s.UpdatedReplicas, want, noun))
	}
}
