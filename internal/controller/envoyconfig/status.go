package envoyconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
)

// Condition types and reasons of an EnvoyConfig (Degraded is conditions.Degraded).
const (
	ConditionAccepted  = "Accepted"
	ConditionPublished = "Published"

	ReasonValid             = "Valid"
	ReasonInvalidResources  = "InvalidResources"
	ReasonReferencesMissing = "ReferencesMissing"
	ReasonPublished         = "Published"
	ReasonNotPublished      = "NotPublished"
	ReasonRolledBack        = "RolledBack"
	ReasonNacked            = "Nacked"
	ReasonNameClash         = "NameClash"
	ReasonEnvoyNotFound     = "EnvoyNotFound"
)

// State is what the controller found about one EnvoyConfig and its fleet.
type State struct {
	// Invalid holds the resources that failed to decode or validate.
	Invalid []error
	// Rejected holds the references that lead nowhere in the fleet.
	Rejected []error
	// Clashes holds resources another EnvoyConfig of the fleet also defines.
	Clashes      []string
	EnvoyMissing bool
	// PublishedVersion is the fleet's version on the xDS server.
	PublishedVersion string
	// RolledBack is set when the fleet's proxies all rejected the newest
	// version, and the last version they accepted was published again.
	RolledBack bool
	// RollbackDetail is a proxy's reason for rejecting the rolled-back version.
	RollbackDetail string
	Proxies        xds.ProxyCounts
}

// ContentHash is a short hash of an EnvoyConfig's spec.
func ContentHash(c *examplev1.EnvoyConfig) string {
	b, _ := json.Marshal(c.Spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Status returns the status c should have. Conditions start from c's current
// ones, so an unchanged condition keeps its lastTransitionTime.
func Status(c *examplev1.EnvoyConfig, s State) examplev1.EnvoyConfigStatus {
	st := examplev1.EnvoyConfigStatus{
		PublishedVersion:   s.PublishedVersion,
		ContentHash:        ContentHash(c),
		ObservedGeneration: c.Generation,
		Proxies: examplev1.ProxyStatus{
			Connected: int32(s.Proxies.Connected), Acked: int32(s.Proxies.Acked),
			Nacked: int32(s.Proxies.Nacked), LastNACK: s.Proxies.LastNACK,
		},
		Conditions: append([]metav1.Condition(nil), c.Status.Conditions...),
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(&st.Conditions, c.Generation, typ, status, reason, msg)
	}

	accepted := false
	switch {
	case len(s.Invalid) > 0:
		set(ConditionAccepted, metav1.ConditionFalse, ReasonInvalidResources, joinErrors(s.Invalid))
	case len(s.Rejected) > 0:
		set(ConditionAccepted, metav1.ConditionFalse, ReasonReferencesMissing, joinErrors(s.Rejected))
	default:
		accepted = true
		set(ConditionAccepted, metav1.ConditionTrue, ReasonValid, "every resource is valid and its references exist")
	}

	switch {
	case s.RolledBack:
		set(ConditionPublished, metav1.ConditionFalse, ReasonRolledBack,
			fmt.Sprintf("every proxy rejected the newest version; version %s, which they accepted, is served again", s.PublishedVersion))
	case !accepted:
		set(ConditionPublished, metav1.ConditionFalse, ReasonNotPublished,
			"this version is not served; the fleet keeps the last accepted version of this EnvoyConfig, if any")
	default:
		set(ConditionPublished, metav1.ConditionTrue, ReasonPublished, fmt.Sprintf("served to the fleet as version %s", s.PublishedVersion))
	}

	switch {
	case s.RolledBack:
		set(conditions.Degraded, metav1.ConditionTrue, ReasonRolledBack, "every connected proxy rejected the newest version: "+s.RollbackDetail)
	case s.Proxies.Nacked > 0:
		set(conditions.Degraded, metav1.ConditionTrue, ReasonNacked,
			fmt.Sprintf("%d of %d proxies rejected version %s: %s", s.Proxies.Nacked, s.Proxies.Connected, s.PublishedVersion, s.Proxies.LastNACK))
	case len(s.Clashes) > 0:
		set(conditions.Degraded, metav1.ConditionTrue, ReasonNameClash, strings.Join(s.Clashes, "; "))
	case s.EnvoyMissing:
		set(conditions.Degraded, metav1.ConditionTrue, ReasonEnvoyNotFound,
			fmt.Sprintf("Envoy %q does not exist in this namespace; the configuration is served to proxies of that fleet identity", c.Spec.EnvoyRef))
	default:
		set(conditions.Degraded, metav1.ConditionFalse, conditions.AsExpected, "")
	}
	return st
}

func joinErrors(errs []error) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}
