package gateway

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// GatewayNameLabel is the label the Gateway API gives the objects that
// implement a Gateway: the Gateway's name.
const GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// Fleet returns the Envoy that serves gw: the template's spec (the Envoy
// the GatewayClass's parametersRef names; nil for none), with what the
// Gateway decides in place of its own: the built-in xDS server, a Service
// of type LoadBalancer, and a port for each of the listeners' ports, which
// the proxies listen on at gateway.ContainerPort. The fleet's names follow
// the Gateway's, and the Gateway controls it.
func Fleet(gw *gwv1.Gateway, template *examplev1.Envoy) *examplev1.Envoy {
	spec := examplev1.EnvoySpec{}
	if template != nil {
		spec = *template.Spec.DeepCopy()
	}
	spec.Name, spec.ConfigMapName, spec.XDS = "", "", nil
	spec.ServiceType = corev1.ServiceTypeLoadBalancer
	spec.Ports = nil
	for _, port := range listenerPorts(gw) {
		spec.Ports = append(spec.Ports, examplev1.EnvoyPort{
			Name: fmt.Sprintf("gw-%d", port), Port: port, TargetPort: gateway.ContainerPort(port),
		})
	}
	if gw.Spec.Infrastructure != nil {
		spec.PodLabels = mergeLabels(spec.PodLabels, gw.Spec.Infrastructure.Labels)
		spec.PodAnnotations = mergeAnnotations(spec.PodAnnotations, gw.Spec.Infrastructure.Annotations)
	}
	return &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{
			Name:      gateway.FleetName(gw.Name),
			Namespace: gw.Namespace,
			Labels: map[string]string{
				names.ManagedByLabel: names.ManagedByValue,
				GatewayNameLabel:     gw.Name,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(gw, gwv1.SchemeGroupVersion.WithKind("Gateway"))},
		},
		Spec: spec,
	}
}

// listenerPorts are the distinct ports of gw's listeners, in order.
func listenerPorts(gw *gwv1.Gateway) []int32 {
	var ports []int32
	for _, l := range gw.Spec.Listeners {
		if !slices.Contains(ports, int32(l.Port)) {
			ports = append(ports, int32(l.Port))
		}
	}
	slices.Sort(ports)
	return ports
}

func mergeLabels(base map[string]examplev1.LabelValue, add map[gwv1.LabelKey]gwv1.LabelValue) map[string]examplev1.LabelValue {
	if len(add) == 0 {
		return base
	}
	out := map[string]examplev1.LabelValue{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[string(k)] = string(v)
	}
	return out
}

func mergeAnnotations(base map[string]string, add map[gwv1.AnnotationKey]gwv1.AnnotationValue) map[string]string {
	if len(add) == 0 {
		return base
	}
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[string(k)] = string(v)
	}
	return out
}
