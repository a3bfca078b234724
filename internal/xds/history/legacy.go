package history

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// The previous release kept a fleet's history in the ConfigMap <envoy>-xds
// of the fleet's own namespace, where anyone who may write ConfigMaps there
// could forge it. When a fleet has no history in the operator's namespace
// yet, such a legacy history is adopted as far as the operator's own
// records vouch for it, and no further (AdoptLegacy); once the fleet's
// history is recorded in the operator's namespace, the leader deletes it.

// LegacyComponent is names.ComponentLabel's value on a legacy history.
const LegacyComponent = "xds-revisions"

// LegacyName is the name the previous release gave the history of
// the fleet whose Envoy is named envoy, in the fleet's namespace.
func LegacyName(envoy string) string {
	const suffix = "-xds"
	if len(envoy)+len(suffix) <= 253 {
		return envoy + suffix
	}
	sum := sha256.Sum256([]byte(envoy))
	return envoy[:253-len(suffix)-9] + "-" + hex.EncodeToString(sum[:4]) + suffix
}

// LegacyFleet returns the fleet whose legacy history o says it is, when o
// is labelled as one. Only IsLegacyOf tells whether it is where the
// previous release kept that fleet's history.
func LegacyFleet(o metav1.Object) (fleet.ID, bool) {
	if o.GetLabels()[names.ComponentLabel] != LegacyComponent {
		return fleet.ID{}, false
	}
	id := fleet.ID{Namespace: o.GetNamespace(), Name: o.GetAnnotations()[FleetAnnotation]}
	_, err := fleet.Parse(id.String())
	return id, err == nil
}

// IsLegacyOf reports whether o is, by its metadata, where the
// previous release kept the history of fleet id.
func IsLegacyOf(o metav1.Object, id fleet.ID) bool {
	got, ok := LegacyFleet(o)
	return ok && got == id && o.GetName() == LegacyName(id.Name)
}

// AdoptLegacy returns what may be taken from fleet id's legacy history cm:
// only its served revision, and only when that is vouched, the version
// that the fleet's EnvoyConfigs report as published in their status, which
// only the operator writes, and its content hashes to that version. A
// forger cannot make other content hash to that version: what is adopted
// is exactly what the operator published. Neither its acked and rejected
// marks nor its other revisions are taken, since nothing vouches for them;
// the proxies mark the revision acked again, and rejections are kept in the
// EnvoyConfigs' status.
func AdoptLegacy(cm *corev1.ConfigMap, id fleet.ID, vouched string) (publish.History, bool) {
	if vouched == "" || !IsLegacyOf(cm, id) {
		return publish.History{}, false
	}
	legacy, err := decode(cm.BinaryData[historyKey])
	if err != nil || legacy.Current != vouched {
		return publish.History{}, false
	}
	served := legacy.Served()
	if served == nil {
		return publish.History{}, false
	}
	r := publish.Revision{Version: served.Version, Configs: served.Configs}
	if checkRevision(r, id, true) != nil {
		return publish.History{}, false
	}
	return publish.History{Fleet: id.String(), Current: r.Version, Revisions: []publish.Revision{r}}, true
}
