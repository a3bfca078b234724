// Package envoy is the Envoy controller: each Envoy object becomes a fleet of
// Envoy proxies: a ConfigMap with the bootstrap, a Deployment and a Service,
// with a PodDisruptionBudget and a HorizontalPodAutoscaler where the fleet
// has them, and an egress NetworkPolicy for a fleet of the built-in xDS
// server.
//
// render.go holds the pure part: the children an Envoy wants (Desired) and the
// status it reports. controller.go reads, compares, writes and reports.
package envoy

import (
	"fmt"
	"net/netip"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Children are the objects a fleet is made of, and what they were made from.
type Children struct {
	// XDS is the xDS server the bootstrap points at.
	XDS proxy.XDSServer
	// BootstrapHash is the hash of the bootstrap in ConfigMap.
	BootstrapHash string
	ConfigMap     *corev1.ConfigMap
	Deployment    *appsv1.Deployment
	Service       *corev1.Service
	// PodDisruptionBudget and HorizontalPodAutoscaler are nil when the
	// fleet has none.
	PodDisruptionBudget     *policyv1.PodDisruptionBudget
	HorizontalPodAutoscaler *autoscalingv2.HorizontalPodAutoscaler
	// NetworkPolicy is nil for a fleet of another xDS server, or one whose
	// spec.egress.networkPolicy is Disabled.
	NetworkPolicy *networkingv1.NetworkPolicy
}

// Desired returns every child that e wants, each with its controller
// ownerReference. It fails only when the spec cannot be turned into a valid
// bootstrap, which admission should have refused.
func Desired(e *examplev1.Envoy, d fleet.Defaults) (Children, error) {
	xds := fleet.XDSServer(e, d)
	xds.StatsSink = statsSink(e)
	files, err := proxy.RenderFiles(xds, fleet.Overload(e))
	if err != nil {
		return Children{XDS: xds}, err
	}
	hash := proxy.Hash(files[proxy.BootstrapKey])
	return Children{
		XDS:                     xds,
		BootstrapHash:           hash,
		ConfigMap:               configMap(e, files),
		Deployment:              deployment(e, d, hash),
		Service:                 service(e),
		PodDisruptionBudget:     podDisruptionBudget(e),
		HorizontalPodAutoscaler: horizontalPodAutoscaler(e),
		NetworkPolicy:           networkPolicy(e, d),
	}, nil
}

// statsSink tells whether e's proxies stream their stats to the operator
// (proxy.StatsSink): for a fleet of the built-in xDS server with
// spec.configRollout, whose steps are to be judged by their proxies' own
// figures. A fleet of another xDS server, or without a rollout, keeps its
// bootstrap as it was. Setting or removing spec.configRollout changes the
// bootstrap, and so rolls the fleet's pods.
func statsSink(e *examplev1.Envoy) bool {
	return fleet.BuiltinXDS(e) && e.Spec.ConfigRollout != nil
}

func objectMeta(e *examplev1.Envoy, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       e.Namespace,
		Labels:          fleet.Labels(e),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(e, examplev1.GroupVersion.WithKind("Envoy"))},
	}
}

// configMap holds the fleet's bootstrap, and the SDS files of its xDS
// connection's certificates.
func configMap(e *examplev1.Envoy, files map[string][]byte) *corev1.ConfigMap {
	data := map[string]string{}
	for k, v := range files {
		data[k] = string(v)
	}
	return &corev1.ConfigMap{ObjectMeta: objectMeta(e, fleet.ConfigMapName(e)), Data: data}
}

// deployment runs the fleet's proxies. bootstrapHash goes on the pod
// template, so that a new bootstrap rolls the pods.
func deployment(e *examplev1.Envoy, d fleet.Defaults, bootstrapHash string) *appsv1.Deployment {
	podLabels := objects.MergeMaps(e.Spec.PodLabels, fleet.Labels(e))
	annotations := objects.MergeMaps(e.Spec.PodAnnotations, proxy.PrometheusAnnotations())
	annotations[fleet.BootstrapHashAnnotation] = bootstrapHash

	opts := fleet.ContainerOptions(e, d)
	var lowPort bool
	opts.ListenerPorts, lowPort = fleet.ListenerPorts(e)
	podSecurity := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if lowPort {
		// Let the non-root proxy bind ports below 1024 (a namespaced, safe sysctl).
		podSecurity.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}
	}
	proxyContainer := proxy.Container(opts)
	if hook := proxy.DrainHook(opts.DrainSeconds); hook != nil {
		proxyContainer.Lifecycle = &corev1.Lifecycle{PreStop: hook}
	}
	return &appsv1.Deployment{
		ObjectMeta: objectMeta(e, fleet.Name(e)),
		Spec: appsv1.DeploymentSpec{
			// With spec.autoscaling, the autoscaler writes spec.replicas
			// through the Envoy's scale subresource, and this follows it.
			Replicas: ptr.To(fleet.Replicas(e)),
			Selector: &metav1.LabelSelector{MatchLabels: fleet.SelectorLabels(e)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{proxyContainer},
					Volumes:                       fleet.Volumes(e, d),
					SecurityContext:               podSecurity,
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To(fleet.TerminationGracePeriodSeconds(e)),
					TopologySpreadConstraints:     fleet.TopologySpreadConstraints(e),
				},
			},
		},
	}
}

// podDisruptionBudget limits the voluntary disruptions of the fleet's pods:
// the spec's budget, or maxUnavailable 1 for a fleet that can have two
// proxies or more. A proxy that is not ready serves nothing, so evicting it
// never waits for the budget (unhealthyPodEvictionPolicy AlwaysAllow): a
// pod that cannot start does not block a node's drain.
func podDisruptionBudget(e *examplev1.Envoy) *policyv1.PodDisruptionBudget {
	b := e.Spec.PodDisruptionBudget
	most := fleet.Replicas(e)
	if a := e.Spec.Autoscaling; a != nil {
		most = max(most, a.MaxReplicas)
	}
	if b == nil && most < 2 {
		return nil
	}
	spec := policyv1.PodDisruptionBudgetSpec{
		Selector:                   &metav1.LabelSelector{MatchLabels: fleet.SelectorLabels(e)},
		UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
	}
	switch {
	case b != nil && b.MinAvailable != nil:
		spec.MinAvailable = ptr.To(*b.MinAvailable)
	case b != nil && b.MaxUnavailable != nil:
		spec.MaxUnavailable = ptr.To(*b.MaxUnavailable)
	default:
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(fleet.DefaultMaxUnavailable))
	}
	return &policyv1.PodDisruptionBudget{ObjectMeta: objectMeta(e, fleet.Name(e)), Spec: spec}
}

// horizontalPodAutoscaler scales the Envoy, through its scale subresource,
// on its proxies' CPU, or is nil without spec.autoscaling.
func horizontalPodAutoscaler(e *examplev1.Envoy) *autoscalingv2.HorizontalPodAutoscaler {
	a := e.Spec.Autoscaling
	if a == nil {
		return nil
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: objectMeta(e, fleet.Name(e)),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
				APIVersion: examplev1.GroupVersion.String(), Kind: "Envoy", Name: e.Name,
			},
			MinReplicas: ptr.To(ptr.Deref(a.MinReplicas, fleet.DefaultMinReplicas)),
			MaxReplicas: a.MaxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{
						Type:               autoscalingv2.UtilizationMetricType,
						AverageUtilization: ptr.To(ptr.Deref(a.TargetCPUUtilizationPercentage, fleet.DefaultTargetCPU)),
					},
				},
			}},
		},
	}
}

// networkPolicy closes, at the network layer, what the content policy
// refuses by the text of a destination: a host name may resolve to any
// address at run time (a record that says 169.254.169.254, a Service in the
// operator's namespace), and a Service's endpoints change after admission.
// It selects the fleet's pods and allows their egress:
//
//   - to every address but the link-local ranges and the cloud metadata
//     services (translate.MetadataPrefixes), as excepts of 0.0.0.0/0 and
//     ::/0; or, when the Envoy's spec.egress.allowed has CIDRs, to those
//     alone, less the metadata ranges inside them;
//   - without allowed CIDRs, to the pods of every namespace but the
//     operator's (the namespaceSelector matches kubernetes.io/metadata.name,
//     which the API server sets and no one else can);
//   - to the operator's namespace at the built-in xDS server's ports alone,
//     which the proxies need;
//   - to port 53, over UDP and TCP, anywhere: DNS, whether the cluster's
//     resolver runs as pods or on a node-local address.
//
// NetworkPolicies add up: this one opens no more than the rules above, and
// a stricter one of the namespace's own still applies to what it does not
// allow. How a CNI treats an ipBlock that holds pod addresses varies (docs/
// concepts/security-model.md says which enforce what). It is nil for a
// fleet of another xDS server, whose destinations this operator does not
// serve, and when spec.egress.networkPolicy is Disabled.
func networkPolicy(e *examplev1.Envoy, d fleet.Defaults) *networkingv1.NetworkPolicy {
	if !fleet.BuiltinXDS(e) || (e.Spec.Egress != nil && e.Spec.Egress.NetworkPolicy == examplev1.EnvoyNetworkPolicyDisabled) {
		return nil
	}
	closed := translate.MetadataPrefixes()
	var cidrs []string
	if e.Spec.Egress != nil && e.Spec.Egress.Allowed != nil {
		cidrs = e.Spec.Egress.Allowed.CIDRs
	}
	var rules []networkingv1.NetworkPolicyEgressRule
	if len(cidrs) == 0 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: ipBlock(netip.MustParsePrefix("0.0.0.0/0"), closed)},
			{IPBlock: ipBlock(netip.MustParsePrefix("::/0"), closed)},
		}})
		others := &metav1.LabelSelector{}
		if d.Namespace != "" {
			others.MatchExpressions = []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{d.Namespace}}}
		}
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: others}}})
	} else {
		var to []networkingv1.NetworkPolicyPeer
		for _, c := range cidrs {
			p, err := netip.ParsePrefix(c)
			if err != nil || slices.ContainsFunc(closed, func(m netip.Prefix) bool { return m.Bits() <= p.Bits() && m.Contains(p.Addr()) }) {
				continue // refused at admission; wholly closed
			}
			to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: ipBlock(p, closed)})
		}
		if len(to) > 0 {
			rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: to})
		}
	}
	if d.Namespace != "" && len(d.XDSPorts) > 0 {
		var ports []networkingv1.NetworkPolicyPort
		for _, p := range d.XDSPorts {
			ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))})
		}
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: d.Namespace}}}},
			Ports: ports,
		})
	}
	rules = append(rules, networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{
		{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))},
		{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(53))},
	}})
	return &networkingv1.NetworkPolicy{
		ObjectMeta: objectMeta(e, fleet.Name(e)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: fleet.SelectorLabels(e)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      rules,
		},
	}
}

// ipBlock is within, less the ranges of closed inside it (of its family).
func ipBlock(within netip.Prefix, closed []netip.Prefix) *networkingv1.IPBlock {
	b := &networkingv1.IPBlock{CIDR: within.String()}
	for _, c := range closed {
		if c.Addr().Is4() == within.Addr().Is4() && c.Bits() > within.Bits() && within.Contains(c.Addr()) {
			b.Except = append(b.Except, c.String())
		}
	}
	return b
}

// service selects only this Envoy's pods.
func service(e *examplev1.Envoy) *corev1.Service {
	var ports []corev1.ServicePort
	for _, p := range fleet.Ports(e) {
		ports = append(ports, corev1.ServicePort{
			Name: p.Name, Port: p.Port, TargetPort: intstr.FromInt32(p.TargetPortOrPort()), Protocol: corev1.ProtocolTCP,
		})
	}
	serviceType := e.Spec.ServiceType
	if serviceType == "" {
		serviceType = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		ObjectMeta: objectMeta(e, fleet.Name(e)),
		Spec: corev1.ServiceSpec{
			Type:     serviceType,
			Selector: fleet.SelectorLabels(e),
			Ports:    ports,
		},
	}
}

// Observed is what the controller found, for computing status.
type Observed struct {
	// Desired is what the spec asks for.
	Desired Children
	// Deployment is the fleet's own Deployment as last seen, or nil.
	Deployment *appsv1.Deployment
	// Problem is why the fleet is Degraded, or nil: an invalid spec, a
	// failed write or a child's name taken by a foreign object.
	Problem *conditions.Problem
}

// Status returns the status e should have. Conditions start from e's
// current ones, so an unchanged condition keeps its lastTransitionTime.
func Status(e *examplev1.Envoy, obs Observed) examplev1.EnvoyStatus {
	st := examplev1.EnvoyStatus{
		ObservedGeneration: e.Generation,
		Selector:           labels.SelectorFromSet(fleet.SelectorLabels(e)).String(),
		BootstrapHash:      obs.Desired.BootstrapHash,
		XDSServer:          obs.Desired.XDS.String(),
		Conditions:         append([]metav1.Condition(nil), e.Status.Conditions...),
	}
	if d := obs.Deployment; d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
		st.AvailableReplicas = d.Status.AvailableReplicas
	}
	conditions.SetDegraded(&st.Conditions, e.Generation, obs.Problem)
	conditions.SetFromDeployment(&st.Conditions, e.Generation, fleet.Name(e), obs.Deployment, fleet.Replicas(e), "proxies", obs.Problem)
	return st
}

// invalidSpec is the Problem of a spec that cannot be rendered.
func invalidSpec(err error) *conditions.Problem {
	return &conditions.Problem{Reason: examplev1.EnvoyReasonInvalidSpec, Message: fmt.Sprintf("the spec cannot be rendered: %v", err)}
}
