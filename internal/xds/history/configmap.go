package history

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// A fleet's history is kept in a ConfigMap of the operator's namespace,
// where only the operator and the cluster's admins may write: a tenant who
// may write ConfigMaps, or anything else, in the fleet's namespace cannot
// touch it. Its name is a hash of the fleet's identity, so that no two
// fleets share one however long their names; the identity is in it too,
// and everything read back is checked (Read), so that a copy
// elsewhere, or one for another fleet, is never taken for the fleet's.
// A revision holds no Secret's data and no spec.resources.secrets: those
// are served from the Secrets and EnvoyConfigs as they are
// (translate.Config.Recorded). An EnvoyConfig created before admission
// refused secret material inline may still hold some elsewhere (a
// listener's or a cluster's transport socket): it is served, and recorded,
// as it is.
const (
	// Component is names.ComponentLabel's value on a fleet's history.
	Component = "xds-history"
	// FleetNamespaceLabel is the namespace of the fleet a history belongs
	// to, for people (kubectl get -l) and for listing.
	FleetNamespaceLabel = "kube-envoy-controller.io/fleet-namespace"
	// FleetAnnotation names the fleet a history belongs to, <namespace>/<name>.
	FleetAnnotation = "kube-envoy-controller.io/fleet"
	// VersionAnnotation shows the served version, for people.
	VersionAnnotation = "kube-envoy-controller.io/xds-version"
	// RolloutAnnotation shows, while the served version rolls out, which
	// proxies are served it (publish.Rollout.Key): a replica serves anew
	// when it changes.
	RolloutAnnotation = "kube-envoy-controller.io/xds-rollout"
	historyKey        = "history.json.gz"
	historyPrefix     = "kube-envoy-controller-xds-history-"
	// maxRecorded stays under the API server's 1 MiB limit on a ConfigMap.
	maxRecorded = 900 << 10
)

// maxDecoded bounds what a recorded history may inflate to (a variable for
// the tests' sake).
var maxDecoded = 64 << 20

// Name is the name of the ConfigMap that holds the history of fleet
// id: the SHA-256 of its identity, which namespace and name (up to 63 and
// 253 characters) could not spell within a name's limit without colliding.
func Name(id fleet.ID) string {
	sum := sha256.Sum256([]byte(id.String()))
	return historyPrefix + hex.EncodeToString(sum[:])
}

// ConfigMap returns the ConfigMap, in namespace (the operator's),
// that records h for fleet id. When h does not fit, the contents of
// revisions other than the served one, its rollback target and the one a
// rollout serves the other proxies are dropped first.
func ConfigMap(namespace string, id fleet.ID, h publish.History) (*corev1.ConfigMap, error) {
	h.Fleet = id.String()
	data, err := encode(h)
	if err != nil {
		return nil, err
	}
	if len(data) > maxRecorded {
		target := h.RollbackTarget()
		previous, _ := h.Staged()
		kept := make([]publish.Revision, 0, 3)
		for _, r := range h.Revisions {
			if r.Version == h.Current || (target != nil && r.Version == target.Version) || (previous != nil && r.Version == previous.Version) {
				kept = append(kept, r)
			}
		}
		h.Revisions = kept
		if data, err = encode(h); err != nil {
			return nil, err
		}
		if len(data) > maxRecorded {
			return nil, fmt.Errorf("the fleet's configuration takes %d KiB compressed, more than a ConfigMap holds (%d KiB)", len(data)>>10, maxRecorded>>10)
		}
	}
	annotations := map[string]string{FleetAnnotation: id.String(), VersionAnnotation: h.Current}
	if h.Rollout != nil {
		annotations[RolloutAnnotation] = h.Rollout.Key()
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(id),
			Namespace: namespace,
			Labels: map[string]string{
				names.ManagedByLabel: names.ManagedByValue,
				names.ComponentLabel: Component,
				FleetNamespaceLabel:  id.Namespace,
			},
			Annotations: annotations,
		},
		BinaryData: map[string][]byte{historyKey: data},
	}, nil
}

// IsOf reports whether o, by its metadata, is the history of fleet
// id in namespace (the operator's): its namespace, name, labels and the
// fleet it names. An object of that name that is not is someone else's.
func IsOf(o metav1.Object, namespace string, id fleet.ID) bool {
	l := o.GetLabels()
	return o.GetNamespace() == namespace && o.GetName() == Name(id) &&
		l[names.ManagedByLabel] == names.ManagedByValue && l[names.ComponentLabel] == Component &&
		l[FleetNamespaceLabel] == id.Namespace && o.GetAnnotations()[FleetAnnotation] == id.String()
}

// Fleet returns the fleet whose history o says it is, when o is
// labelled as a history and lies in namespace (the operator's). Only
// IsOf and Read tell whether it really is.
func Fleet(o metav1.Object, namespace string) (fleet.ID, bool) {
	if o.GetNamespace() != namespace || o.GetLabels()[names.ComponentLabel] != Component {
		return fleet.ID{}, false
	}
	id, err := fleet.Parse(o.GetAnnotations()[FleetAnnotation])
	return id, err == nil
}

// ErrNotHistory: the ConfigMap is not the fleet's history (IsOf).
var ErrNotHistory = errors.New("not the fleet's revision history")

// Read reads the history of fleet id from cm, and checks it: cm is
// the fleet's history in namespace (IsOf); its content decodes,
// names the fleet, and is consistent: every revision that keeps content
// (the served one, and every one not rejected) has the version its content
// hashes to, every EnvoyConfig in it is of the fleet's namespace, no
// version appears twice, and the served version is one of them. A history
// that fails any of these is not used.
func Read(cm *corev1.ConfigMap, namespace string, id fleet.ID) (publish.History, error) {
	if !IsOf(cm, namespace, id) {
		return publish.History{}, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, ErrNotHistory)
	}
	h, err := decode(cm.BinaryData[historyKey])
	if err == nil {
		err = checkHistory(h, id)
	}
	if err != nil {
		return publish.History{}, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return h, nil
}

// checkHistory is Read's check of a decoded history's content.
func checkHistory(h publish.History, id fleet.ID) error {
	if h.Fleet != id.String() {
		return fmt.Errorf("the history is of fleet %q, not %s", h.Fleet, id)
	}
	seen := map[string]bool{}
	for _, r := range h.Revisions {
		if r.Version == "" || seen[r.Version] {
			return fmt.Errorf("version %q is empty or recorded twice", r.Version)
		}
		seen[r.Version] = true
		if err := checkRevision(r, id, r.Version == h.Current); err != nil {
			return err
		}
	}
	if h.Current != "" && !seen[h.Current] {
		return fmt.Errorf("the served version %s is not among the revisions", h.Current)
	}
	for name, w := range h.Withheld {
		if ns, _, ok := strings.Cut(name, "/"); !ok || ns != id.Namespace || w.Previous != nil && w.Previous.Name != name {
			return fmt.Errorf("it withholds EnvoyConfig %q, which is not of namespace %s, or keeps another's content for it", name, id.Namespace)
		}
	}
	return nil
}

// checkRevision is Read's check of one revision; served tells whether it
// is the served one, which always keeps its content.
func checkRevision(r publish.Revision, id fleet.ID, served bool) error {
	if r.Rejected != "" && !served {
		if len(r.Configs) > 0 {
			return fmt.Errorf("version %s was rejected and keeps content", r.Version)
		}
		return nil
	}
	for _, c := range r.Configs {
		if ns, _, ok := strings.Cut(c.Name, "/"); !ok || ns != id.Namespace {
			return fmt.Errorf("version %s holds EnvoyConfig %q, which is not of namespace %s", r.Version, c.Name, id.Namespace)
		}
	}
	if v := translate.VersionOf(r.Configs); v != r.Version {
		return fmt.Errorf("version %s holds content whose version is %s", r.Version, v)
	}
	return nil
}

func encode(h publish.History) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decode(data []byte) (publish.History, error) {
	var h publish.History
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return h, err
	}
	b, err := io.ReadAll(io.LimitReader(zr, int64(maxDecoded)+1))
	if err != nil {
		return h, err
	}
	if len(b) > maxDecoded {
		return h, fmt.Errorf("the history inflates to more than %d MiB", maxDecoded>>20)
	}
	return h, json.Unmarshal(b, &h)
}
