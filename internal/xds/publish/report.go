package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// Every replica serves xDS to the proxies connected to it, and reports what
// they answered in a ConfigMap of its own, in the operator's namespace. The
// leader adds the reports up (Sum): status and rollbacks count the proxies
// of every replica.
const (
	// ReportComponent is ComponentLabel's value on a replica's report.
	ReportComponent = "xds-proxies"
	// ReplicaAnnotation names the replica a report comes from.
	ReplicaAnnotation = "kube-envoy-controller.io/replica"
	reportKey         = "proxies.json"
	reportPrefix      = "kube-envoy-controller-xds-proxies-"
)

// FleetProxies is what one replica's proxies of one fleet answered.
type FleetProxies struct {
	// Version is the revision the replica serves the fleet.
	Version   string `json:"version"`
	Connected int    `json:"connected"`
	Acked     int    `json:"acked,omitempty"`
	Nacked    int    `json:"nacked,omitempty"`
	LastNACK  string `json:"lastNACK,omitempty"`
}

// Report is one replica's proxies, by fleet ID; fleets without a connected
// proxy are left out.
type Report map[string]FleetProxies

// Changed returns the fleets whose entries differ between a and b.
func Changed(a, b Report) []string {
	var out []string
	for id, fa := range a {
		if fb, ok := b[id]; !ok || !reflect.DeepEqual(fa, fb) {
			out = append(out, id)
		}
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Sum counts a fleet's proxies on every replica with respect to the revision
// version: a replica that serves another revision adds connected proxies
// that answered neither way.
func Sum(reports []Report, fleetID, version string) Acks {
	var a Acks
	for _, r := range reports {
		f, ok := r[fleetID]
		if !ok {
			continue
		}
		a.Connected += f.Connected
		if f.Version != version {
			continue
		}
		a.Acked += f.Acked
		a.Nacked += f.Nacked
		if f.LastNACK != "" {
			a.LastNACK = f.LastNACK
		}
	}
	return a
}

// ReportName is the name of the ConfigMap of replica's report.
func ReportName(replica string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, replica)
	name = strings.Trim(reportPrefix+name, "-.")
	if len(name) > validation.DNS1123SubdomainMaxLength || name != reportPrefix+replica {
		sum := sha256.Sum256([]byte(replica))
		short := name
		if len(short) > 200 {
			short = short[:200]
		}
		name = strings.Trim(short, "-.") + "-" + hex.EncodeToString(sum[:4])
	}
	return name
}

// ReportConfigMap returns the ConfigMap that stores replica's report.
func ReportConfigMap(namespace, replica string, r Report) (*corev1.ConfigMap, error) {
	for limit := MaxDetail; ; limit /= 4 {
		shortened := Report{}
		for id, f := range r {
			if len(f.LastNACK) > limit {
				f.LastNACK = Truncate(f.LastNACK[:limit])
			}
			shortened[id] = f
		}
		b, err := json.Marshal(shortened)
		if err != nil {
			return nil, err
		}
		if len(b) <= maxStored || limit < 16 {
			if len(b) > maxStored {
				return nil, fmt.Errorf("the report of %d fleets takes %d KiB, more than a ConfigMap holds", len(r), len(b)>>10)
			}
			return &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:        ReportName(replica),
					Namespace:   namespace,
					Labels:      map[string]string{objects.ManagedByLabel: objects.ManagedByValue, ComponentLabel: ReportComponent},
					Annotations: map[string]string{ReplicaAnnotation: replica},
				},
				Data: map[string]string{reportKey: string(b)},
			}, nil
		}
	}
}

// IsReport reports whether o is a replica's report.
func IsReport(o metav1.Object) bool { return o.GetLabels()[ComponentLabel] == ReportComponent }

// ReportFromConfigMap reads a replica's report.
func ReportFromConfigMap(cm *corev1.ConfigMap) (Report, error) {
	r := Report{}
	if s := cm.Data[reportKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return r, nil
}
