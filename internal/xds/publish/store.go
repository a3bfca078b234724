package publish

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// A fleet's history is kept in a ConfigMap of its own, in the fleet's
// namespace, which every replica watches. A revision holds no secret: inline
// secrets are served from the EnvoyConfigs as they are (translate.Config.Recorded).
const (
	// ComponentLabel marks the control plane's ConfigMaps; its value says which.
	ComponentLabel = "app.kubernetes.io/component"
	// HistoryComponent is ComponentLabel's value on a fleet's history.
	HistoryComponent = "xds-revisions"
	// FleetAnnotation names the fleet (its Envoy) a history belongs to.
	FleetAnnotation = "kube-envoy-controller.io/fleet"
	// VersionAnnotation shows the served version, for people.
	VersionAnnotation = "kube-envoy-controller.io/xds-version"
	historyKey        = "history.json.gz"
	// maxStored stays under the API server's 1 MiB limit on a ConfigMap.
	maxStored = 900 << 10
)

// HistoryName is the name of the ConfigMap that holds the history of the
// fleet whose Envoy is named envoy.
func HistoryName(envoy string) string {
	const suffix = "-xds"
	if len(envoy)+len(suffix) <= 253 {
		return envoy + suffix
	}
	sum := sha256.Sum256([]byte(envoy))
	return envoy[:253-len(suffix)-9] + "-" + hex.EncodeToString(sum[:4]) + suffix
}

// HistoryConfigMap returns the ConfigMap that stores h for fleet id. When h
// does not fit, the contents of revisions other than the served one and its
// rollback target are dropped first.
func HistoryConfigMap(id fleet.ID, h History) (*corev1.ConfigMap, error) {
	data, err := encode(h)
	if err != nil {
		return nil, err
	}
	if len(data) > maxStored {
		h = h.clone()
		target := h.rollbackTarget()
		kept := h.Revisions[:0]
		for _, r := range h.Revisions {
			if r.Version == h.Current || (target != nil && r.Version == target.Version) {
				kept = append(kept, r)
			}
		}
		h.Revisions = kept
		if data, err = encode(h); err != nil {
			return nil, err
		}
		if len(data) > maxStored {
			return nil, fmt.Errorf("the fleet's configuration takes %d KiB compressed, more than a ConfigMap holds (%d KiB)", len(data)>>10, maxStored>>10)
		}
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      HistoryName(id.Name),
			Namespace: id.Namespace,
			Labels: map[string]string{
				objects.ManagedByLabel: objects.ManagedByValue,
				ComponentLabel:         HistoryComponent,
			},
			Annotations: map[string]string{FleetAnnotation: id.Name, VersionAnnotation: h.Current},
		},
		BinaryData: map[string][]byte{historyKey: data},
	}, nil
}

// FromConfigMap reads the history a ConfigMap stores.
func FromConfigMap(cm *corev1.ConfigMap) (History, error) {
	var h History
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[historyKey]))
	if err != nil {
		return h, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return h, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return h, nil
}

// IsHistory reports whether o is a fleet's history, and whose.
func IsHistory(o metav1.Object) (envoy string, ok bool) {
	if o.GetLabels()[ComponentLabel] != HistoryComponent {
		return "", false
	}
	envoy = o.GetAnnotations()[FleetAnnotation]
	return envoy, envoy != ""
}

func encode(h History) ([]byte, error) {
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
