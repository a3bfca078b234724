package proxy

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Names and paths of what the Envoy container mounts.
const (
	ContainerName       = "envoy"
	BootstrapVolumeName = "envoy-bootstrap"
	BootstrapDir        = "/etc/envoy"
	tmpVolumeName       = "envoy-tmp"
	// ClientCertVolumeName mounts the fleet's client certificate Secret at ClientCertDir.
	ClientCertVolumeName = "xds-client-certificate"
	ClientCertDir        = "/etc/envoy/xds-tls"
	// UID is the envoy user of the official images.
	UID = 101
)

// BootstrapPath is where Envoy reads its bootstrap.
var BootstrapPath = path.Join(BootstrapDir, BootstrapKey)

// ContainerOptions are what varies between fleets.
type ContainerOptions struct {
	Image    string
	LogLevel string
	// FleetID is the identity that every proxy of a fleet shares (a
	// fleet.ID's String): its --service-cluster, which is node.cluster in
	// xDS requests. The built-in xDS server groups proxies by it.
	FleetID   string
	Resources corev1.ResourceRequirements
	// ListenerPorts are the ports the proxy's listeners bind, by name.
	ListenerPorts []corev1.ContainerPort
	// XDS is the xDS server the bootstrap points at; with MutualTLS, the
	// container mounts the fleet's client certificate.
	XDS XDSServer
	// DrainSeconds is Envoy's drain time (DrainArgs); 0 keeps Envoy's
	// defaults.
	DrainSeconds int32
}

// Container returns the Envoy container: it reads the bootstrap from the
// mounted ConfigMap, takes its node id from the pod's name and its cluster
// from the fleet, runs as a non-root user on a read-only root file system,
// and is ready when /ready on ReadyPort says so.
func Container(o ContainerOptions) corev1.Container {
	ports := append([]corev1.ContainerPort(nil), o.ListenerPorts...)
	ports = append(ports, corev1.ContainerPort{Name: "ready-stats", ContainerPort: ReadyPort, Protocol: corev1.ProtocolTCP})
	args := []string{
		"-c", BootstrapPath,
		"--service-node", "$(POD_NAME)",
		"--service-cluster", o.FleetID,
		"--log-level", o.LogLevel,
		// Hot restart needs shared memory and a second process; Kubernetes
		// rolls pods instead.
		"--disable-hot-restart",
	}
	return corev1.Container{
		Name:  ContainerName,
		Image: o.Image,
		Args:  append(args, DrainArgs(o.DrainSeconds)...),
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		Ports:        ports,
		Resources:    o.Resources,
		VolumeMounts: volumeMounts(o.XDS),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/ready", Port: intstr.FromInt32(ReadyPort),
			}},
			PeriodSeconds:    5,
			FailureThreshold: 3,
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To[int64](UID),
			RunAsGroup:               ptr.To[int64](UID),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// StartupProbe is the probe of a proxy that runs as a native sidecar: the
// kubelet starts the pod's next containers once it passes, so the
// application's first request finds the proxy ready. It checks every second,
// so that they start within a second of the proxy, and gives the proxy two
// minutes (its first configuration from the xDS server, or Envoy's initial
// fetch timeout) before the kubelet restarts it.
func StartupProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/ready", Port: intstr.FromInt32(ReadyPort),
		}},
		PeriodSeconds:    1,
		FailureThreshold: 120,
	}
}

func volumeMounts(xds XDSServer) []corev1.VolumeMount {
	m := []corev1.VolumeMount{
		{Name: BootstrapVolumeName, MountPath: BootstrapDir, ReadOnly: true},
		{Name: tmpVolumeName, MountPath: "/tmp"},
	}
	if xds.MutualTLS {
		m = append(m, corev1.VolumeMount{Name: ClientCertVolumeName, MountPath: ClientCertDir, ReadOnly: true})
	}
	return m
}

// Volumes returns the volumes Container mounts: the bootstrap ConfigMap, a
// writable /tmp and, with mutual TLS, the fleet's client certificate Secret.
func Volumes(configMapName, clientCertSecret string, xds XDSServer) []corev1.Volume {
	var items []corev1.KeyToPath
	for _, k := range FileKeys(xds) {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	v := []corev1.Volume{
		{Name: BootstrapVolumeName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName},
			Items:                items,
		}}},
		{Name: tmpVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if xds.MutualTLS {
		// Readable by any user: the volume is mounted into the proxy's
		// container alone, whose only process is Envoy (a sidecar's pod
		// has the application's fsGroup, which the proxy's user may not share).
		v = append(v, corev1.Volume{Name: ClientCertVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  clientCertSecret,
			DefaultMode: ptr.To[int32](0o444),
		}}})
	}
	return v
}

// PrometheusAnnotations point Prometheus at the proxy's stats on ReadyPort.
func PrometheusAnnotations() map[string]string {
	return map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   strconv.Itoa(ReadyPort),
		"prometheus.io/path":   "/stats/prometheus",
	}
}
