package envoyconfig

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/status"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// State is what the controller found about one EnvoyConfig and its fleet.
type State struct {
	// Config is what translation found about the EnvoyConfig.
	Config translate.ConfigStatus
	// Held is why the fleet keeps its published revision whole, if it does.
	Held         []string
	EnvoyMissing bool
	// PublishedVersion is the fleet's served revision.
	PublishedVersion string
	// Rejected is set when every proxy rejected the fleet's newest content
	// (a proxy's error_detail), RejectedVersion to its version; RolledBack
	// when an earlier version is served instead.
	Rejected        string
	RejectedVersion string
	RolledBack      bool
	// Unattributed is set when that rejection could not be attributed to
	// the change of an EnvoyConfig, so that none was withheld.
	Unattributed bool
	// ServedRejected is set when the served version itself was rejected by
	// every proxy, with nothing to go back to.
	ServedRejected string
	Proxies        publish.Acks
	// PublishError is why the revision could not be recorded: the API
	// server's reason for refusing the write, and its message.
	PublishError *conditions.Problem
	// HistoryUnusable, when set, says that the fleet's stored history was
	// unusable, and what became of it.
	HistoryUnusable string
	// Rollout is where the served version's rollout stands, while it is
	// under way or aborted.
	Rollout *RolloutState
}

// RolloutState is where the rollout of the served version stands.
type RolloutState struct {
	publish.Rollout
	// Served of Proxies connected proxies are served the version.
	Served, Proxies int
	// Waiting says why its step is not promoted yet.
	Waiting string
}

// message describes the rollout for the Published condition.
func (r RolloutState) message() string {
	msg := fmt.Sprintf("rolling out as version %s: step %d, served to %d of %d connected proxies; the others keep version %s",
		r.Revision, r.Step+1, r.Served, r.Proxies, r.Previous)
	if r.Waiting != "" {
		msg += "; " + r.Waiting
	}
	return msg
}

// status is the rollout's part of an EnvoyConfig's status; nil for none.
func (r *RolloutState) status() *examplev1.ConfigRolloutStatus {
	if r == nil {
		return nil
	}
	st := &examplev1.ConfigRolloutStatus{Version: r.Revision, PreviousVersion: r.Previous, Phase: string(r.Phase),
		Step: int32(r.Step + 1), ServedProxies: int32(r.Served), ConnectedProxies: int32(r.Proxies), Message: r.Waiting}
	if r.Phase == publish.RolloutAborted {
		st.Message = r.aborted()
	}
	return st
}

// aborted describes an aborted rollout.
func (r RolloutState) aborted() string {
	why := "it was aborted by hand"
	switch a := r.Aborted; {
	case a != nil && a.Metric != "":
		why = "its analysis failed: " + a.Detail
	case a != nil && !a.ByHand:
		why = fmt.Sprintf("proxy %q rejected it: %s", a.Proxy, a.Detail)
	}
	return fmt.Sprintf("the rollout of version %s was aborted (%s); every proxy is served version %s until the content changes", r.Revision, why, r.Previous)
}

// Status returns the status c should have. Conditions start from c's current
// ones, so an unchanged condition keeps its lastTransitionTime.
func Status(c *examplev1.EnvoyConfig, s State) examplev1.EnvoyConfigStatus {
	st := examplev1.EnvoyConfigStatus{
		PublishedVersion:   s.PublishedVersion,
		ContentHash:        publish.ContentHash(c),
		ObservedGeneration: c.Generation,
		Proxies: examplev1.ProxyStatus{
			Connected: int32(s.Proxies.Connected), Acked: int32(s.Proxies.Acked),
			Nacked: int32(s.Proxies.Nacked), LastNACK: publish.Truncate(s.Proxies.LastNACK),
		},
		RejectedVersions: rejectedVersions(c, s.RejectedVersion),
		Rollout:          s.Rollout.status(),
		Conditions:       append([]metav1.Condition(nil), c.Status.Conditions...),
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(&st.Conditions, c.Generation, typ, status, reason, msg)
	}
	cs := s.Config
	kept := map[translate.Choice]string{
		translate.ChoicePublished: fmt.Sprintf("the fleet keeps this EnvoyConfig's published content (version %s)", s.PublishedVersion),
		translate.ChoiceNone:      "none of it is served",
	}[cs.Choice]

	withheld := ""
	if w := cs.Withheld; w != nil && w.Rollout && w.Analysis {
		withheld = fmt.Sprintf("the rollout of this change in version %s failed its analysis on its first proxies (%s); it is withheld until the content changes, and the fleet's other EnvoyConfigs are served; %s",
			w.Version, w.Detail, kept)
	} else if w != nil && w.Rollout {
		withheld = fmt.Sprintf("proxy %q, of the first proxies of its rollout, rejected this change in version %s (%s); it is withheld until the content changes, and the fleet's other EnvoyConfigs are served; %s",
			w.Node, w.Version, w.Detail, kept)
	} else if w != nil {
		withheld = fmt.Sprintf("every proxy rejected this change in version %s (proxy %q: %s); it is withheld until the content changes, and the fleet's other EnvoyConfigs are served; %s",
			w.Version, w.Node, w.Detail, kept)
	}
	switch {
	case len(cs.Refused) > 0:
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionFalse, examplev1.EnvoyConfigReasonPolicyViolation, "the content policy refuses: "+strings.Join(cs.Refused, "; ")+"; "+kept)
	case withheld != "":
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionFalse, examplev1.EnvoyConfigReasonWithheld, withheld)
	case len(cs.Invalid) > 0:
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionFalse, examplev1.EnvoyConfigReasonInvalidResources, strings.Join(cs.Invalid, "; "))
	case cs.EnvoyRefused != "":
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionFalse, examplev1.EnvoyConfigReasonRefusedByEnvoy, cs.EnvoyRefused+"; "+kept)
	case len(cs.Dangling) > 0 && cs.Choice != translate.ChoiceCurrent:
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionFalse, examplev1.EnvoyConfigReasonReferencesMissing, strings.Join(cs.Dangling, "; ")+"; "+kept)
	case len(s.Held) > 0 && cs.Choice != translate.ChoiceCurrent:
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionFalse, examplev1.EnvoyConfigReasonHeld, "this change is not served: it would leave references in the fleet leading nowhere: "+
			strings.Join(s.Held, "; ")+"; "+kept)
	case cs.EnvoyUnjudged != "":
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionTrue, examplev1.EnvoyConfigReasonValid,
			"every resource is valid and its references exist, by the operator's rules; it was not loaded in a real Envoy: "+cs.EnvoyUnjudged)
	default:
		set(examplev1.EnvoyConfigConditionAccepted, metav1.ConditionTrue, examplev1.EnvoyConfigReasonValid, "every resource is valid and its references exist")
	}

	switch {
	case s.RolledBack:
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionFalse, examplev1.EnvoyConfigReasonRolledBack,
			fmt.Sprintf("every proxy rejected the newest version; version %s, which they accepted, is served again", s.PublishedVersion))
	case s.Rejected != "" && s.PublishedVersion == "":
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionFalse, examplev1.EnvoyConfigReasonRejected, "every proxy rejected the newest version ("+s.Rejected+
			"), and no version they accepted is known: nothing is served until the content changes")
	case s.Rejected != "":
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionFalse, examplev1.EnvoyConfigReasonRejected, "every proxy rejected the newest version: "+s.Rejected)
	case s.PublishError != nil:
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionFalse, examplev1.EnvoyConfigReasonPublishFailed, s.PublishError.Message)
	case s.Rollout != nil && s.Rollout.Phase == publish.RolloutAborted && cs.Choice == translate.ChoiceCurrent:
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionFalse, examplev1.EnvoyConfigReasonRolloutAborted, s.Rollout.aborted())
	case s.Rollout != nil && s.Rollout.Phase == publish.RolloutProgressing && cs.Choice == translate.ChoiceCurrent:
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionTrue, examplev1.EnvoyConfigReasonRollingOut, s.Rollout.message())
	case cs.Choice != translate.ChoiceCurrent:
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionFalse, examplev1.EnvoyConfigReasonNotPublished, "this version is not served: "+kept)
	default:
		set(examplev1.EnvoyConfigConditionPublished, metav1.ConditionTrue, examplev1.EnvoyConfigReasonPublished, fmt.Sprintf("served to the fleet as version %s", s.PublishedVersion))
	}

	switch {
	case len(cs.Refused) > 0:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonPolicyViolation, "the content policy refuses: "+strings.Join(cs.Refused, "; ")+"; "+kept)
	case withheld != "":
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonWithheld, withheld)
	case cs.EnvoyRefused != "" && len(cs.Invalid) == 0:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonRefusedByEnvoy, cs.EnvoyRefused+"; "+kept)
	case s.RolledBack:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonRolledBack, "every connected proxy rejected the newest version: "+s.Rejected+unattributed(s))
	case s.Rejected != "" || s.ServedRejected != "":
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonRejected, "every connected proxy rejected the served version, and none accepted an earlier one: "+
			s.Rejected+s.ServedRejected+unattributed(s))
	case s.PublishError != nil:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, s.PublishError.Reason, s.PublishError.Message)
	case s.HistoryUnusable != "":
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonHistoryUnusable, s.HistoryUnusable)
	case s.Rollout != nil && s.Rollout.Phase == publish.RolloutAborted:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonRolloutAborted, s.Rollout.aborted())
	case s.Proxies.Nacked > 0:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonNacked,
			fmt.Sprintf("%d of %d proxies rejected version %s: %s", s.Proxies.Nacked, s.Proxies.Connected, s.PublishedVersion, s.Proxies.LastNACK))
	case len(cs.Dangling) > 0 && cs.Choice == translate.ChoiceCurrent:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonReferencesMissing, strings.Join(cs.Dangling, "; ")+
			fmt.Sprintf("; the fleet keeps serving version %s, in which they exist, until this is fixed", s.PublishedVersion))
	case len(cs.Clashes) > 0:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonNameClash, strings.Join(cs.Clashes, "; "))
	case len(cs.Secrets) > 0:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonSecretUnavailable, strings.Join(cs.Secrets, "; "))
	case len(cs.Endpoints) > 0:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonNoEndpointPort, strings.Join(cs.Endpoints, "; "))
	case len(cs.InlineKeys) > 0:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonInlinePrivateKey, strings.Join(cs.InlineKeys, "; "))
	case s.EnvoyMissing:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionTrue, examplev1.EnvoyConfigReasonEnvoyNotFound,
			fmt.Sprintf("Envoy %q does not exist in this namespace; the configuration is served to proxies of that fleet identity", c.Spec.EnvoyRef))
	default:
		set(examplev1.EnvoyConfigConditionDegraded, metav1.ConditionFalse, examplev1.EnvoyConfigReasonAsExpected, "")
	}
	return st
}

// unattributed says, for a rejection that no EnvoyConfig's change
// explains, what became of the fleet.
func unattributed(s State) string {
	if !s.Unattributed {
		return ""
	}
	return "; no EnvoyConfig's change explains the rejection (it refuses what no EnvoyConfig changed, such as endpoints or a Secret's certificate), so no change is withheld and the fleet's newest content is held whole until it changes"
}

// rejectedVersions returns the fleet versions c's status records as
// rejected: those recorded before, while c's content is unchanged since
// (status.contentHash), and rejected, the fleet's newest version if every
// proxy rejected it, first; at most publish.MaxRevisions.
func rejectedVersions(c *examplev1.EnvoyConfig, rejected string) []string {
	var out []string
	if rejected != "" {
		out = append(out, rejected)
	}
	if c.Status.ContentHash == publish.ContentHash(c) {
		for _, v := range c.Status.RejectedVersions {
			if v != rejected && len(out) < publish.MaxRevisions {
				out = append(out, v)
			}
		}
	}
	return out
}

// Vouched returns the version that configs, the fleet's EnvoyConfigs,
// report as published in their status, which only the operator writes: the
// one they all report, ignoring those that report none; "" if they differ
// or none reports one.
func Vouched(configs []*examplev1.EnvoyConfig) string {
	vouched := ""
	for _, c := range configs {
		switch v := c.Status.PublishedVersion; {
		case v == "":
		case vouched == "":
			vouched = v
		case v != vouched:
			return ""
		}
	}
	return vouched
}

// transitions returns the events of an EnvoyConfig's change of status,
// besides Degraded's: a change of its that became withheld, with the
// proxy that rejected it and Envoy's message.
func transitions(before, after status.Object) []status.Event {
	was := meta.FindStatusCondition(before.GetConditions(), examplev1.EnvoyConfigConditionAccepted)
	is := meta.FindStatusCondition(after.GetConditions(), examplev1.EnvoyConfigConditionAccepted)
	if is == nil || is.Reason != examplev1.EnvoyConfigReasonWithheld || was != nil && was.Reason == is.Reason && was.ObservedGeneration == is.ObservedGeneration {
		return nil
	}
	return []status.Event{{Type: corev1.EventTypeWarning, Reason: examplev1.EnvoyConfigEventWithheld, Action: "Publish", Note: is.Message}}
}

// withholds reports whether h withholds a change that version, rejected,
// was attributed to.
func withholds(h publish.History, version string) bool {
	for _, w := range h.Withheld {
		if w.Version == version {
			return true
		}
	}
	return false
}
