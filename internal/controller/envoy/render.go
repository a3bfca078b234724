// Package envoy is the Envoy controller: each Envoy object becomes a fleet of
// Envoy proxies: a ConfigMap with the bootstrap, a Deployment and a Service.
//
// render.go holds the pure part: the objects an Envoy wants and the status it
// reports. controller.go reads, compares, writes and reports.
package envoy

import (
	"cmp"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	proxy "github.com/kube-envoy-controller/kube-envoy-controller/internal/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
)

// Labels and annotations the operator sets on a fleet's objects.
const (
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
	// BootstrapHashAnnotation on the pod template rolls the pods when the bootstrap changes.
	BootstrapHashAnnotation = "kube-envoy-controller.io/bootstrap-hash"
)

// Condition types and reasons an Envoy reports.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"

	ReasonResourceExists = "ResourceExists"
	ReasonAsExpected     = "AsExpected"
	ReasonAvailable      = "MinimumReplicasAvailable"
	ReasonUnavailable    = "MinimumReplicasUnavailable"
	ReasonRollingOut     = "RollingOut"
	ReasonRolledOut      = "RolledOut"
	ReasonNoDeployment   = "DeploymentMissing"
	ReasonInvalidSpec    = "InvalidSpec"
)

// Defaults is what the operator's flags decide for every fleet.
type Defaults struct {
	// XDS is the built-in xDS server, used by fleets whose spec has no xds.
	XDS proxy.XDSServer
}

// Name is the fleet's Deployment and Service name.
func Name(e *examplev1.Envoy) string {
	if e.Spec.Name != "" {
		return e.Spec.Name
	}
	return e.Name
}

// ConfigMapName is the name of the fleet's bootstrap ConfigMap.
func ConfigMapName(e *examplev1.Envoy) string {
	if e.Spec.ConfigMapName != "" {
		return e.Spec.ConfigMapName
	}
	return Name(e) + "-bootstrap"
}

// XDSServer is the xDS server the fleet uses: its spec's, or the built-in one.
func XDSServer(e *examplev1.Envoy, d Defaults) proxy.XDSServer {
	x := e.Spec.XDS
	if x == nil {
		return d.XDS
	}
	return proxy.XDSServer{ClusterName: cmp.Or(x.Name, "xds_cluster"), Host: x.Host, Port: uint32(x.Port)}
}

// PodLabels select the fleet's pods: unique to this Envoy.
func PodLabels(e *examplev1.Envoy) map[string]string {
	return map[string]string{NameLabel: "envoy", InstanceLabel: e.Name, objects.ManagedByLabel: objects.ManagedByValue}
}

// Ports are the fleet's listener ports, with the API's default.
func Ports(e *examplev1.Envoy) []examplev1.EnvoyPort {
	if len(e.Spec.Ports) == 0 {
		return []examplev1.EnvoyPort{{Name: "http", Port: 80, TargetPort: 8080}}
	}
	return e.Spec.Ports
}

func replicas(e *examplev1.Envoy) int32 { return ptr.Deref(e.Spec.Replicas, 1) }

func ownerRef(e *examplev1.Envoy) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(e, examplev1.GroupVersion.WithKind("Envoy"))}
}

func objectMeta(e *examplev1.Envoy, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       e.Namespace,
		Labels:          PodLabels(e),
		OwnerReferences: ownerRef(e),
	}
}

// ConfigMap returns the ConfigMap that holds the fleet's bootstrap.
func ConfigMap(e *examplev1.Envoy, bootstrap []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: objectMeta(e, ConfigMapName(e)),
		Data:       map[string]string{proxy.BootstrapKey: string(bootstrap)},
	}
}

// Deployment returns the fleet's Deployment. bootstrapHash goes on the pod
// template, so that a new bootstrap rolls the pods.
func Deployment(e *examplev1.Envoy, bootstrapHash string) *appsv1.Deployment {
	podLabels := objects.MergeMaps(e.Spec.PodLabels, PodLabels(e))
	annotations := objects.MergeMaps(e.Spec.PodAnnotations, proxy.PrometheusAnnotations())
	annotations[BootstrapHashAnnotation] = bootstrapHash

	var listenerPorts []corev1.ContainerPort
	lowPort := false
	for _, p := range Ports(e) {
		listenerPorts = append(listenerPorts, corev1.ContainerPort{Name: p.Name, ContainerPort: p.TargetPortOrPort(), Protocol: corev1.ProtocolTCP})
		lowPort = lowPort || p.TargetPortOrPort() < 1024
	}
	container := proxy.Container(proxy.ContainerOptions{
		Image:         cmp.Or(e.Spec.Image, examplev1.DefaultImage),
		LogLevel:      cmp.Or(e.Spec.LogLevel, "info"),
		FleetID:       proxy.FleetID(e.Namespace, e.Name),
		Resources:     e.Spec.Resources,
		ListenerPorts: listenerPorts,
	})
	podSecurity := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if lowPort {
		// Let the non-root proxy bind ports below 1024 (a namespaced, safe sysctl).
		podSecurity.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}
	}
	return &appsv1.Deployment{
		ObjectMeta: objectMeta(e, Name(e)),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas(e)),
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(e)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{container},
					Volumes:                       proxy.Volumes(ConfigMapName(e)),
					SecurityContext:               podSecurity,
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](30),
				},
			},
		},
	}
}

// selectorLabels are the labels the Deployment and Service select pods by.
func selectorLabels(e *examplev1.Envoy) map[string]string {
	return map[string]string{NameLabel: "envoy", InstanceLabel: e.Name}
}

// Service returns the fleet's Service: it selects only this Envoy's pods.
func Service(e *examplev1.Envoy) *corev1.Service {
	var ports []corev1.ServicePort
	for _, p := range Ports(e) {
		ports = append(ports, corev1.ServicePort{
			Name: p.Name, Port: p.Port, TargetPort: intstr.FromInt32(p.TargetPortOrPort()), Protocol: corev1.ProtocolTCP,
		})
	}
	return &corev1.Service{
		ObjectMeta: objectMeta(e, Name(e)),
		Spec: corev1.ServiceSpec{
			Type:     cmp.Or(e.Spec.ServiceType, corev1.ServiceTypeClusterIP),
			Selector: selectorLabels(e),
			Ports:    ports,
		},
	}
}

// Observed is what the controller found, for computing status.
type Observed struct {
	// Deployment is the fleet's own Deployment, or nil.
	Deployment *appsv1.Deployment
	// BootstrapHash is the hash of the bootstrap the fleet should run.
	BootstrapHash string
	XDS           proxy.XDSServer
	// Clashes names the children whose names are taken by objects the
	// Envoy does not control, as "Kind name".
	Clashes []string
	// Invalid is set when the spec cannot be turned into a bootstrap.
	Invalid error
	// changed lists, by verb (Created, Updated), the children this reconcile wrote.
	changed map[string][]string
}

// Status returns the status e should have. Conditions start from e's
// current ones, so an unchanged condition keeps its lastTransitionTime.
func Status(e *examplev1.Envoy, obs Observed) examplev1.EnvoyStatus {
	st := examplev1.EnvoyStatus{
		ObservedGeneration: e.Generation,
		Selector:           labels.SelectorFromSet(selectorLabels(e)).String(),
		BootstrapHash:      obs.BootstrapHash,
		XDSServer:          obs.XDS.String(),
		Conditions:         append([]metav1.Condition(nil), e.Status.Conditions...),
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: e.Generation,
		})
	}
	if d := obs.Deployment; d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
		st.AvailableReplicas = d.Status.AvailableReplicas
	}

	switch {
	case obs.Invalid != nil:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonInvalidSpec, obs.Invalid.Error())
	case len(obs.Clashes) > 0:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonResourceExists,
			fmt.Sprintf("%v already exist and are not managed by this Envoy", obs.Clashes))
	default:
		set(ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
	}

	want := replicas(e)
	d := obs.Deployment
	if d == nil {
		msg := fmt.Sprintf("Deployment %q does not exist", Name(e))
		set(ConditionAvailable, metav1.ConditionFalse, ReasonNoDeployment, msg)
		set(ConditionProgressing, metav1.ConditionFalse, ReasonNoDeployment, msg)
		return st
	}
	msg := fmt.Sprintf("%d of %d proxies available", d.Status.AvailableReplicas, want)
	if d.Status.AvailableReplicas >= want {
		set(ConditionAvailable, metav1.ConditionTrue, ReasonAvailable, msg)
	} else {
		set(ConditionAvailable, metav1.ConditionFalse, ReasonUnavailable, msg)
	}
	s := d.Status
	if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want {
		set(ConditionProgressing, metav1.ConditionFalse, ReasonRolledOut, "all proxies run the current bootstrap and spec")
	} else {
		set(ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut,
			fmt.Sprintf("%d of %d proxies updated", s.UpdatedReplicas, want))
	}
	return st
}
