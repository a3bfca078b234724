package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/meta"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// The rejections that outlive a fleet's history are recorded in its
// EnvoyConfigs' status, which only the operator writes: status.contentHash
// (ContentHash) says for which content, status.rejectedVersions which
// versions every proxy rejected. The controller writes them; the leader and
// kubectl envoy diff read them back with RejectionsOf.

// ContentHash is a short hash of an EnvoyConfig's spec (status.contentHash).
func ContentHash(c *examplev1.EnvoyConfig) string {
	b, _ := json.Marshal(c.Spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// RejectionsOf returns the fleet versions that the status of configs, the
// fleet's EnvoyConfigs, records as rejected by every proxy: Decide does not
// publish them again, whatever the history says or lacks. Each EnvoyConfig
// vouches only while its content is unchanged. The previous release's
// status, which names no version, says the same of the fleet's newest
// version, offered, when every EnvoyConfig, unchanged, reports it rejected
// (Published with reason RolledBack or Rejected) without naming it in
// rejectedVersions: that status was written before an upgrade.
func RejectionsOf(configs []*examplev1.EnvoyConfig, offered string) Rejections {
	out := Rejections{}
	legacy := len(configs) > 0
	for _, c := range configs {
		unchanged := c.Status.ContentHash == ContentHash(c)
		if unchanged {
			for _, v := range c.Status.RejectedVersions {
				out[v] = true
			}
		}
		p := meta.FindStatusCondition(c.Status.Conditions, examplev1.EnvoyConfigConditionPublished)
		legacy = legacy && unchanged && len(c.Status.RejectedVersions) == 0 && p != nil &&
			p.ObservedGeneration == c.Generation && (p.Reason == examplev1.EnvoyConfigReasonRolledBack || p.Reason == examplev1.EnvoyConfigReasonRejected)
	}
	if legacy {
		out[offered] = true
	}
	return out
}
