// Package fleet is what an Envoy object means, below everything that uses it:
// the fleet's identity, the names and labels of its objects, its defaults,
// and the options of its proxies' container. The Envoy controller builds a
// fleet's Deployment from it, and the sidecar injector builds an Envoy
// sidecar from it, so that both run the same proxy. Everything here is pure.
package fleet

import (
	"cmp"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// Defaults of a fleet whose spec leaves a field out. The API server defaults
// spec.replicas and spec.xds.name from the CRD's markers, which must agree
// with these (tested); the others are the operator's.
const (
	// DefaultImage is a pinned release: the one whose v3 API the operator
	// validates bootstraps against.
	DefaultImage    = "envoyproxy/envoy:v1.40.0"
	DefaultLogLevel = "info"
	DefaultReplicas = 1
	// XDSClusterName is the bootstrap's static cluster that reaches the xDS
	// server, when spec.xds does not name it, and for the built-in server.
	XDSClusterName = "xds_cluster"

	// DefaultDrainSeconds is the longest a stopping proxy drains (see
	// proxy.DrainHook), unless spec.drainSeconds says otherwise: long enough
	// for a client's next request on each keep-alive connection, which then
	// closes, and for requests and streams of up to a minute to finish. The
	// CRD's rule on terminationGracePeriodSeconds names it too (tested).
	DefaultDrainSeconds = 60
	// GracePeriodMargin is what a pod's default grace period adds to the
	// drain: the hook's last check and Envoy's own exit take a second or two.
	GracePeriodMargin = 15
	// MinDefaultGracePeriod is the shortest default grace period:
	// Kubernetes' own, which a fleet that does not drain keeps.
	MinDefaultGracePeriod = 30

	// DefaultMinReplicas and DefaultTargetCPU are the autoscaler's defaults:
	// a new proxy takes seconds to become ready, and a fifth of the
	// requested CPU absorbs the load meanwhile.
	DefaultMinReplicas = 1
	DefaultTargetCPU   = 80

	// DefaultMaxUnavailable is the disruption budget of a fleet of two
	// proxies or more whose spec sets none: node drains take its proxies
	// one at a time.
	DefaultMaxUnavailable = 1
)

// DefaultPorts are the listener ports of a fleet whose spec has none.
func DefaultPorts() []examplev1.EnvoyPort {
	return []examplev1.EnvoyPort{{Name: "http", Port: 80, TargetPort: 8080}}
}

// Labels and annotations the operator sets on a fleet's objects.
const (
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
	// NameValue is NameLabel's value on every fleet's objects.
	NameValue = "envoy"
	// BootstrapHashAnnotation on the pod template rolls the pods when the bootstrap changes.
	BootstrapHashAnnotation = "kube-envoy-controller.io/bootstrap-hash"
)

// ID is a fleet's identity: the namespace and name of its Envoy. Every proxy
// of the fleet, sidecars included, sends its String as node.cluster (Envoy's
// --service-cluster), and the built-in xDS server groups proxies by it.
type ID struct {
	Namespace string
	Name      string
}

// Of returns e's fleet identity.
func Of(e *examplev1.Envoy) ID { return ID{Namespace: e.Namespace, Name: e.Name} }

// String returns "<namespace>/<name>".
func (id ID) String() string { return id.Namespace + "/" + id.Name }

// Parse parses a fleet identity as String writes it. Both parts must be
// valid names (DNS-1123 labels for the namespace, subdomains for the name),
// so that a proxy cannot name a fleet that no Envoy could have.
func Parse(s string) (ID, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return ID{}, fmt.Errorf("fleet identity %q: want <namespace>/<name>", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return ID{}, fmt.Errorf("fleet identity %q: namespace: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return ID{}, fmt.Errorf("fleet identity %q: name: %s", s, strings.Join(errs, "; "))
	}
	return ID{Namespace: ns, Name: name}, nil
}

// Name is the fleet's Deployment and Service name.
func Name(e *examplev1.Envoy) string { return cmp.Or(e.Spec.Name, e.Name) }

// ConfigMapName is the name of the fleet's bootstrap ConfigMap.
func ConfigMapName(e *examplev1.Envoy) string {
	return cmp.Or(e.Spec.ConfigMapName, Name(e)+"-bootstrap")
}

// ClientSecretName is the name of the Secret that holds the fleet's client
// certificate for the built-in xDS server (kubernetes.io/tls, with ca.crt).
func ClientSecretName(e *examplev1.Envoy) string { return e.Name + "-xds-client" }

// Replicas is the fleet's desired number of proxies.
func Replicas(e *examplev1.Envoy) int32 { return ptr.Deref(e.Spec.Replicas, DefaultReplicas) }

// Ports are the fleet's listener ports.
func Ports(e *examplev1.Envoy) []examplev1.EnvoyPort {
	if len(e.Spec.Ports) == 0 {
		return DefaultPorts()
	}
	return e.Spec.Ports
}

// SelectorLabels are the labels the Deployment and Service select the
// fleet's pods by: unique to this Envoy.
func SelectorLabels(e *examplev1.Envoy) map[string]string {
	return map[string]string{NameLabel: NameValue, InstanceLabel: e.Name}
}

// Labels are the labels of every object of the fleet, and of its pods: the
// selector labels and the managed-by label that the operator's cache keeps.
func Labels(e *examplev1.Envoy) map[string]string {
	l := SelectorLabels(e) // a map of its own
	l[names.ManagedByLabel] = names.ManagedByValue
	return l
}

// Defaults is what the operator's flags decide for every fleet.
type Defaults struct {
	// XDS is the built-in xDS server, used by fleets whose spec has no xds.
	// Its MutualTLS says whether they reach it over mutual TLS, each with
	// its client certificate (ClientSecretName).
	XDS proxy.XDSServer
	// Namespace is the operator's namespace, and XDSPorts the ports its
	// xDS server's pods listen on (a Service's target port: what a
	// NetworkPolicy sees): the egress NetworkPolicy of each fleet of the
	// built-in server closes the namespace to the proxies but for those
	// ports. Without a namespace, no namespace is closed.
	Namespace string
	XDSPorts  []int32
}

// BuiltinXDS reports whether e's fleet takes its configuration from the
// operator's own xDS server.
func BuiltinXDS(e *examplev1.Envoy) bool { return e.Spec.XDS == nil }

// XDSServer is the xDS server the fleet uses: its spec's, or the built-in one.
func XDSServer(e *examplev1.Envoy, d Defaults) proxy.XDSServer {
	x := e.Spec.XDS
	if x == nil {
		return d.XDS
	}
	return proxy.XDSServer{ClusterName: cmp.Or(x.Name, XDSClusterName), Host: x.Host, Port: uint32(x.Port)}
}

// ContainerOptions are the options of the proxy container of e's fleet,
// without listener ports: a sidecar's would collide with its application's.
// The fleet's own pods add theirs (see ListenerPorts).
func ContainerOptions(e *examplev1.Envoy, d Defaults) proxy.ContainerOptions {
	return proxy.ContainerOptions{
		Image:        cmp.Or(e.Spec.Image, DefaultImage),
		LogLevel:     cmp.Or(e.Spec.LogLevel, DefaultLogLevel),
		FleetID:      Of(e).String(),
		Resources:    e.Spec.Resources,
		XDS:          XDSServer(e, d),
		DrainSeconds: DrainSeconds(e),
	}
}

// DrainSeconds is the longest a stopping proxy of e's fleet drains; 0: it
// does not.
func DrainSeconds(e *examplev1.Envoy) int32 {
	return ptr.Deref(e.Spec.DrainSeconds, DefaultDrainSeconds)
}

// TerminationGracePeriodSeconds is the grace period of e's proxies: the
// spec's, or the drain and a margin, and at least Kubernetes' default.
func TerminationGracePeriodSeconds(e *examplev1.Envoy) int64 {
	if g := e.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return max(MinDefaultGracePeriod, int64(DrainSeconds(e))+GracePeriodMargin)
}

// Overload is what the overload manager of e's proxies protects: a heap
// limit derived from the container's memory limit, when it has one.
func Overload(e *examplev1.Envoy) proxy.Overload {
	mem, ok := e.Spec.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return proxy.Overload{}
	}
	return proxy.Overload{MaxHeapBytes: proxy.MaxHeapBytes(mem.Value())}
}

// TopologySpreadConstraints spread the fleet's pods: the spec's
// constraints, or by default over nodes and zones, softly. Each counts the
// fleet's own pods of the same rollout (pod-template-hash), so that the old
// pods of a rolling update do not skew where the new ones go.
func TopologySpreadConstraints(e *examplev1.Envoy) []corev1.TopologySpreadConstraint {
	spec := e.Spec.TopologySpreadConstraints
	if len(spec) == 0 {
		spec = []examplev1.EnvoySpreadConstraint{
			{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway},
			{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway},
		}
	}
	out := make([]corev1.TopologySpreadConstraint, 0, len(spec))
	for _, c := range spec {
		out = append(out, corev1.TopologySpreadConstraint{
			MaxSkew:            c.MaxSkew,
			TopologyKey:        c.TopologyKey,
			WhenUnsatisfiable:  c.WhenUnsatisfiable,
			LabelSelector:      &metav1.LabelSelector{MatchLabels: SelectorLabels(e)},
			MinDomains:         c.MinDomains,
			NodeAffinityPolicy: c.NodeAffinityPolicy,
			NodeTaintsPolicy:   c.NodeTaintsPolicy,
			MatchLabelKeys:     []string{appsv1.DefaultDeploymentUniqueLabelKey},
		})
	}
	return out
}

// Volumes are the volumes of the proxy container of e's fleet: its bootstrap
// ConfigMap, scratch space and, over mutual TLS, its client certificate.
func Volumes(e *examplev1.Envoy, d Defaults) []corev1.Volume {
	return proxy.Volumes(ConfigMapName(e), ClientSecretName(e), XDSServer(e, d))
}

// ListenerPorts are the container ports of the fleet's listeners, and
// whether one of them is below 1024 (privileged, by default).
func ListenerPorts(e *examplev1.Envoy) (ports []corev1.ContainerPort, low bool) {
	for _, p := range Ports(e) {
		ports = append(ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.TargetPortOrPort(), Protocol: corev1.ProtocolTCP})
		low = low || p.TargetPortOrPort() < 1024
	}
	return ports, low
}
