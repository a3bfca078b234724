package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EnvoySpec is the desired state of a fleet of Envoy proxies.
// +kubebuilder:validation:XValidation:rule="!has(self.terminationGracePeriodSeconds) || self.terminationGracePeriodSeconds >= (has(self.drainSeconds) ? self.drainSeconds : 60) + 5",fieldPath=".terminationGracePeriodSeconds",message="must be at least drainSeconds + 5 (drainSeconds defaults to 60): a pod is killed when its grace period ends, drained or not"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || (has(self.resources) && has(self.resources.requests) && 'cpu' in self.resources.requests)",fieldPath=".autoscaling",message="needs resources.requests.cpu: the CPU target is a share of what each proxy requests"
type EnvoySpec struct {
	// Name is the name of the fleet's Deployment and Service. Defaults to the
	// Envoy's metadata.name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!format.dns1035Label().validate(self).hasValue()",message="must be a DNS-1035 label (it names a Service): lower case alphanumeric characters or '-', starting with a letter and ending with an alphanumeric character"
	Name string `json:"name,omitempty"`

	// ConfigMapName is the name of the ConfigMap that holds the bootstrap.
	// Defaults to <name>-bootstrap.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="must be a DNS-1123 subdomain"
	ConfigMapName string `json:"configMapName,omitempty"`

	// Replicas is the number of Envoy pods.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Autoscaling has a HorizontalPodAutoscaler, owned by the Envoy, scale
	// the fleet between minReplicas and maxReplicas on the proxies' CPU. It
	// scales the Envoy through its scale subresource: spec.replicas is then
	// the autoscaler's to write, and the operator never writes it.
	// +optional
	Autoscaling *EnvoyAutoscaling `json:"autoscaling,omitempty"`

	// DrainSeconds is how long, at most, a proxy that is being stopped (by a
	// rollout, a scale-down, an eviction) drains before it exits: it fails
	// its readiness, has its clients close their connections, keeps
	// accepting while endpoints drop it, and exits as soon as its last
	// connection closes, after at least 10 seconds. It is also Envoy's
	// --drain-time-s. 0 turns draining off: the proxy exits at once, as
	// Envoy does on SIGTERM. Defaults to 60. Draining runs a bash script
	// in the proxy's container: an image without bash needs 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`

	// TerminationGracePeriodSeconds is the proxies' grace period: how long
	// a stopping pod may take, drain included, before it is killed. It must
	// be at least drainSeconds + 5. Defaults to drainSeconds + 15, and to
	// no less than 30.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=7200
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// PodDisruptionBudget limits how many of the fleet's proxies voluntary
	// disruptions (node drains, evictions) may take at once. Without it, a
	// fleet that can have two proxies or more (replicas, or
	// autoscaling.maxReplicas) gets a budget of maxUnavailable: 1, and a
	// smaller fleet none; with it, the fleet always gets this budget.
	// +optional
	PodDisruptionBudget *EnvoyDisruptionBudget `json:"podDisruptionBudget,omitempty"`

	// TopologySpreadConstraints replace the fleet's default spread: its
	// proxies on as many nodes, and as many zones, as the scheduler can
	// find, never at the cost of not scheduling one (maxSkew 1,
	// ScheduleAnyway, over kubernetes.io/hostname and
	// topology.kubernetes.io/zone). Each constraint counts the fleet's own
	// pods of the same rollout, as a pod's topologySpreadConstraints with
	// the fleet's selector and matchLabelKeys [pod-template-hash].
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(d, d.topologyKey == c.topologyKey && d.whenUnsatisfiable == c.whenUnsatisfiable))",message="each pair of topologyKey and whenUnsatisfiable may appear once"
	TopologySpreadConstraints []EnvoySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// XDS is the xDS management server the fleet takes its listeners and
	// clusters from. When it is omitted, the fleet uses the operator's
	// built-in xDS server.
	// +optional
	XDS *XDS `json:"xds,omitempty"`

	// Image is the Envoy container image.
	// +optional
	// +kubebuilder:default="envoyproxy/envoy:v1.40.0"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self == self.trim()",message="must not have leading or trailing whitespace"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(?:(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:[.](?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|[[][a-fA-F0-9:]+[]])(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(?:@(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$') && !self.matches('^[a-f0-9]{64}$')",message="must be an image reference the kubelet can pull: [registry[:port]/]repository[:tag][@digest], such as envoyproxy/envoy:v1.40.0 or registry.example.com/team/image@sha256:<64 hex digits>; the repository in lower case"
	// +kubebuilder:validation:XValidation:rule="size(self.split('@')[0].lastIndexOf(':') > self.split('@')[0].lastIndexOf('/') ? self.split('@')[0].substring(0, self.split('@')[0].lastIndexOf(':')) : self.split('@')[0]) <= 255",message="the image's repository name (registry and path) must be at most 255 characters"
	Image string `json:"image,omitempty"`

	// Resources are the Envoy container's compute resources. They are
	// checked as the API server checks a container's, so that a fleet whose
	// pods could not be created is refused up front.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="claims must be empty: the fleet's pods declare no resource claims"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="requests: each resource name must be cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed extended resource such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, !k.contains('/') || !format.qualifiedName().validate(k).hasValue())",message="requests: an extended resource name must be a qualified name such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="limits: each resource name must be cpu, memory, ephemeral-storage, hugepages-<size> or a domain-prefixed extended resource such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, !k.contains('/') || !format.qualifiedName().validate(k).hasValue())",message="limits: an extended resource name must be a qualified name such as example.com/device"
	// +kubebuilder:validation:XValidation:rule="['cpu', 'memory', 'ephemeral-storage'].all(r, (!has(self.requests) || !(r in self.requests) || !isQuantity(string(self.requests[r])) || !quantity(string(self.requests[r])).isLessThan(quantity('0'))) && (!has(self.limits) || !(r in self.limits) || !isQuantity(string(self.limits[r])) || !quantity(string(self.limits[r])).isLessThan(quantity('0'))))",message="cpu, memory and ephemeral-storage quantities must not be negative"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(r, !(r in self.requests) || !(r in self.limits) || !isQuantity(string(self.requests[r])) || !isQuantity(string(self.limits[r])) || !quantity(string(self.limits[r])).isLessThan(quantity(string(self.requests[r]))))",message="requests must not exceed limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, !(k.startsWith('hugepages-') || (k.contains('/') && !k.contains('kubernetes.io/'))) || (has(self.limits) && k in self.limits))",message="requests: hugepages and extended resources need a limit as well: Kubernetes does not overcommit them"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, !k.contains('/') || (!k.contains('kubernetes.io/') && !k.startsWith('requests.')))",message="requests: an extended resource name must not be in the kubernetes.io domain nor start with requests."
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, !k.startsWith('hugepages-') || isQuantity(k.substring(10)))",message="requests: hugepages-<size> needs a page size, such as hugepages-2Mi"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, !k.contains('/') || (!k.contains('kubernetes.io/') && !k.startsWith('requests.')))",message="limits: an extended resource name must not be in the kubernetes.io domain nor start with requests."
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, !k.startsWith('hugepages-') || isQuantity(k.substring(10)))",message="limits: hugepages-<size> needs a page size, such as hugepages-2Mi"
	// +kubebuilder:validation:XValidation:rule="!((has(self.requests) && self.requests.exists(k, k.startsWith('hugepages-'))) || (has(self.limits) && self.limits.exists(k, k.startsWith('hugepages-')))) || (has(self.requests) && ('cpu' in self.requests || 'memory' in self.requests)) || (has(self.limits) && ('cpu' in self.limits || 'memory' in self.limits))",message="hugepages need a cpu or memory request or limit"
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// LogLevel is Envoy's --log-level.
	// +optional
	// +kubebuilder:default=info
	// +kubebuilder:validation:Enum=trace;debug;info;warning;error;critical;off
	LogLevel string `json:"logLevel,omitempty"`

	// Ports are the listener ports the Service exposes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:default={{name: http, port: 80, targetPort: 8080}}
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, q.port == p.port))",message="port numbers must be unique"
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, (has(q.targetPort) ? q.targetPort : q.port) == (has(p.targetPort) ? p.targetPort : p.port)))",message="the ports Envoy listens on (targetPort, or port when targetPort is not set) must be unique"
	// +kubebuilder:validation:XValidation:rule="!self.exists(p, (has(p.targetPort) ? p.targetPort : p.port) in [19000, 19001])",message="targetPort 19000 and 19001 are reserved for Envoy's admin and its ready/stats listener (an entry without targetPort listens on its port)"
	Ports []EnvoyPort `json:"ports,omitempty"`

	// ServiceType is the type of the fleet's Service.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// PodLabels are added to the labels of the fleet's pods. The labels the
	// operator selects pods by cannot be set here.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by'])",message="app.kubernetes.io/name, app.kubernetes.io/instance and app.kubernetes.io/managed-by are set by the operator"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="every key must be a valid label key: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumeric characters, '-', '_' or '.' that starts and ends with an alphanumeric character"
	PodLabels map[string]LabelValue `json:"podLabels,omitempty"`

	// PodAnnotations are added to the annotations of the fleet's pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k.lowerAscii()).hasValue())",message="every key must be a valid annotation key: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumeric characters, '-', '_' or '.' that starts and ends with an alphanumeric character"
	// +kubebuilder:validation:XValidation:rule="!('kube-envoy-controller.io/bootstrap-hash' in self)",message="kube-envoy-controller.io/bootstrap-hash is set by the operator"
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// ConfigRollout has a change of the fleet's EnvoyConfigs served to a few
	// of its proxies first, then to more, step by step, and to all of them
	// last. A step goes on once every proxy of it accepted the new
	// configuration and bakeSeconds passed; one proxy's rejection serves
	// every proxy the previous configuration again, and the change is not
	// rolled out again until the content changes. The same proxies lead
	// every rollout (the first in the order of a hash of their pod's name).
	// Endpoints and Secrets are not staged: they follow the pods and the
	// Secrets at once. Without it, a change is served to every proxy at
	// once. Applies to fleets of the built-in xDS server. Its proxies then
	// stream their own stats to the operator (the bootstrap's stats sink),
	// so setting or removing it replaces the fleet's pods once.
	// +optional
	ConfigRollout *EnvoyConfigRollout `json:"configRollout,omitempty"`

	// Egress is where the fleet's proxies may connect to. Whoever runs the
	// fleet writes it, not the authors of its EnvoyConfigs: it narrows what
	// their clusters and the other destinations the content policy judges
	// may reach, and the fleet's egress NetworkPolicy. Applies to fleets of
	// the built-in xDS server.
	// +optional
	Egress *EnvoyEgress `json:"egress,omitempty"`
}

// EnvoyEgress is where a fleet's proxies may connect to.
type EnvoyEgress struct {
	// Allowed, when set, is every destination the fleet's EnvoyConfigs may
	// name: an EnvoyConfig with a destination outside it is refused at
	// admission and not served, and an endpoint of a Service outside it is
	// left out. The fleet's NetworkPolicy then allows only its CIDRs (and
	// DNS and the built-in xDS server), when it has any.
	// +optional
	Allowed *EnvoyEgressAllowlist `json:"allowed,omitempty"`

	// NetworkPolicy is whether the operator keeps an egress NetworkPolicy
	// for the fleet's pods: Enabled (the default) or Disabled. The policy
	// allows every destination but the cloud metadata services and
	// link-local addresses, and the operator's namespace but for its xDS
	// port (or, with allowed.cidrs, only those CIDRs). NetworkPolicies
	// add up: where the fleet's namespace has stricter egress policies of
	// its own, this one would open what they close, and Disabled leaves
	// them alone.
	// +optional
	// +kubebuilder:validation:Enum=Enabled;Disabled
	NetworkPolicy EnvoyNetworkPolicy `json:"networkPolicy,omitempty"`
}

// EnvoyNetworkPolicy is whether a fleet has an egress NetworkPolicy.
type EnvoyNetworkPolicy string

const (
	EnvoyNetworkPolicyEnabled  EnvoyNetworkPolicy = "Enabled"
	EnvoyNetworkPolicyDisabled EnvoyNetworkPolicy = "Disabled"
)

// EnvoyEgressAllowlist is the destinations a fleet's proxies may reach.
// A destination written as an IP address must lie in one of its CIDRs; one
// written as a host name must match one of its domains. The content policy
// refuses the cloud metadata services, link-local addresses and the
// operator's names whatever the allowlist says.
// +kubebuilder:validation:XValidation:rule="(has(self.cidrs) && size(self.cidrs) > 0) || (has(self.domains) && size(self.domains) > 0)",message="needs at least one of cidrs and domains: an empty allowlist would allow no destination"
type EnvoyEgressAllowlist struct {
	// CIDRs are the address ranges the proxies may reach, such as
	// 10.0.0.0/8 or 2001:db8::/32.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="must be a CIDR in its canonical form, such as 10.0.0.0/8 (no host bits set)"
	CIDRs []string `json:"cidrs,omitempty"`

	// Domains are the host names the proxies may reach: a name
	// (api.example.com), or every name below a domain (*.example.com, which
	// does not match example.com itself). Lower case.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^([*][.])?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a lower-case DNS name, or *. and a DNS name for every name below it, such as api.example.com or *.example.com"
	Domains []string `json:"domains,omitempty"`
}

// EnvoyConfigRollout is how a change of a fleet's configuration is rolled
// out across its proxies.
type EnvoyConfigRollout struct {
	// Steps are how many of the fleet's connected proxies are served the
	// new configuration at each step, as a number or a percentage (rounded
	// up); a step serves at least one proxy, and every step's proxies
	// include the previous step's. After the last step, every proxy is.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Steps []EnvoyConfigRolloutStep `json:"steps"`

	// BakeSeconds is how long a step's proxies run the new configuration,
	// all of them having accepted it, before the next step. Defaults to 60.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	BakeSeconds *int32 `json:"bakeSeconds,omitempty"`

	// Analysis, when set, judges each step by what its proxies served,
	// from the stats they stream to the operator: once every proxy of the
	// step accepted the new configuration, its proxies' requests, in the
	// listeners and clusters the change touched, are held to the limits
	// below and compared with those of the proxies still on the previous
	// configuration (the baseline). A proxy past a limit aborts the
	// rollout at once, as a rejection does; the step goes on once
	// bakeSeconds passed and each of its proxies served at least
	// minRequests requests within the limits. A step whose proxies serve
	// fewer waits, and a proxy that sends no stats through the bake, and
	// for at least a minute, aborts it. {} sets every default.
	// +optional
	Analysis *EnvoyConfigRolloutAnalysis `json:"analysis,omitempty"`
}

// EnvoyConfigRolloutAnalysis is what a rollout's step is held to. Each
// limit has a ceiling, in absolute terms, and a bound relative to the
// baseline's value, in percent of it (200: at most twice the baseline's).
// The relative bound applies only where the baseline served at least
// minRequests requests, and only above 1% for a share and above 100 ms for
// a duration, so that a baseline without any error does not make one error
// an abort. A p99 is judged only over at least 100 requests, on each side:
// the p99 of fewer is their slowest. 0 turns a bound off.
type EnvoyConfigRolloutAnalysis struct {
	// MinRequests is how many requests a proxy of the step serves, in the
	// scopes judged, before it can pass; a scope with fewer is not judged.
	// Defaults to 50.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MinRequests *int32 `json:"minRequests,omitempty"`

	// ServerErrors bounds the share of responses with a 5xx status.
	// Defaults to at most 5%, and twice the baseline's.
	// +optional
	// +kubebuilder:default={}
	ServerErrors *EnvoyRolloutShareLimit `json:"serverErrors,omitempty"`

	// Resets bounds the share of requests reset, downstream or upstream.
	// Defaults to at most 5%, and twice the baseline's.
	// +optional
	// +kubebuilder:default={}
	Resets *EnvoyRolloutShareLimit `json:"resets,omitempty"`

	// ConnectFailures bounds the failed connections to the upstream
	// clusters, per request. Defaults to at most 5%, and twice the
	// baseline's.
	// +optional
	// +kubebuilder:default={}
	ConnectFailures *EnvoyRolloutShareLimit `json:"connectFailures,omitempty"`

	// LatencyP99 bounds the 99th percentile of the requests' duration.
	// Defaults to no ceiling, and twice the baseline's.
	// +optional
	// +kubebuilder:default={}
	LatencyP99 *EnvoyRolloutLatencyLimit `json:"latencyP99,omitempty"`
}

// EnvoyRolloutShareLimit bounds a share of a step's proxy's requests.
type EnvoyRolloutShareLimit struct {
	// MaxPercent is the ceiling, in percent of the requests; 0: none.
	// Defaults to 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxPercent *int32 `json:"maxPercent,omitempty"`

	// MaxToBaselinePercent is the bound relative to the baseline's share,
	// in percent of it: 200 is twice the baseline's; 0: none. Defaults to
	// 200.
	// +optional
	// +kubebuilder:default=200
	// +kubebuilder:validation:XValidation:rule="self == 0 || (self >= 100 && self <= 100000)",message="maxToBaselinePercent must be 0 (no bound) or from 100 (the baseline's own share) to 100000"
	MaxToBaselinePercent *int32 `json:"maxToBaselinePercent,omitempty"`
}

// EnvoyRolloutLatencyLimit bounds a duration of a step's proxy's requests.
type EnvoyRolloutLatencyLimit struct {
	// MaxMilliseconds is the ceiling, in milliseconds; 0: none. Defaults to
	// 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600000
	MaxMilliseconds *int32 `json:"maxMilliseconds,omitempty"`

	// MaxToBaselinePercent is the bound relative to the baseline's
	// duration, in percent of it: 200 is twice the baseline's; 0: none.
	// Defaults to 200.
	// +optional
	// +kubebuilder:default=200
	// +kubebuilder:validation:XValidation:rule="self == 0 || (self >= 100 && self <= 100000)",message="maxToBaselinePercent must be 0 (no bound) or from 100 (the baseline's own duration) to 100000"
	MaxToBaselinePercent *int32 `json:"maxToBaselinePercent,omitempty"`
}

// EnvoyConfigRolloutStep is one step of a rollout: a number of proxies or a
// percentage of them.
// +kubebuilder:validation:XValidation:rule="has(self.proxies) != has(self.percent)",message="set exactly one of proxies and percent"
type EnvoyConfigRolloutStep struct {
	// Proxies is how many proxies the step serves.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Proxies *int32 `json:"proxies,omitempty"`

	// Percent is the share of the fleet's connected proxies the step serves.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent,omitempty"`
}

// EnvoySpreadConstraint spreads a fleet's proxies over a topology: the
// fields of a pod's topologySpreadConstraints that a fleet sets, with the
// same meaning. The label selector is the fleet's own.
// +kubebuilder:validation:XValidation:rule="!has(self.minDomains) || self.whenUnsatisfiable == 'DoNotSchedule'",fieldPath=".minDomains",message="may be set only with whenUnsatisfiable: DoNotSchedule"
type EnvoySpreadConstraint struct {
	// MaxSkew is how much the number of the fleet's proxies may differ
	// between two domains of the topology.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxSkew int32 `json:"maxSkew"`

	// TopologyKey is the node label whose values are the domains, such as
	// kubernetes.io/hostname or topology.kubernetes.io/zone.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a label key, such as topology.kubernetes.io/zone"
	TopologyKey string `json:"topologyKey"`

	// WhenUnsatisfiable is what the scheduler does with a proxy that would
	// break maxSkew: DoNotSchedule keeps it pending, ScheduleAnyway places
	// it where the skew grows least.
	// +required
	// +kubebuilder:validation:Enum=DoNotSchedule;ScheduleAnyway
	WhenUnsatisfiable corev1.UnsatisfiableConstraintAction `json:"whenUnsatisfiable"`

	// MinDomains is the fewest domains that count as eligible, with
	// DoNotSchedule.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinDomains *int32 `json:"minDomains,omitempty"`

	// NodeAffinityPolicy says whether the pods' node affinity limits the
	// domains counted: Honor (the default) or Ignore.
	// +optional
	// +kubebuilder:validation:Enum=Honor;Ignore
	NodeAffinityPolicy *corev1.NodeInclusionPolicy `json:"nodeAffinityPolicy,omitempty"`

	// NodeTaintsPolicy says whether node taints the pods do not tolerate
	// limit the domains counted: Honor or Ignore (the default).
	// +optional
	// +kubebuilder:validation:Enum=Honor;Ignore
	NodeTaintsPolicy *corev1.NodeInclusionPolicy `json:"nodeTaintsPolicy,omitempty"`
}

// EnvoyAutoscaling is the HorizontalPodAutoscaler of a fleet.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
type EnvoyAutoscaling struct {
	// MinReplicas is the fewest proxies the autoscaler keeps. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the most proxies the autoscaler starts.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`

	// TargetCPUUtilizationPercentage is the average CPU use, as a percentage
	// of the CPU each proxy requests (resources.requests.cpu), that the
	// autoscaler keeps the fleet at. Defaults to 80.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// EnvoyDisruptionBudget is the PodDisruptionBudget of a fleet: one of
// maxUnavailable and minAvailable, a number of proxies or a percentage.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxUnavailable) && has(self.minAvailable))",message="set maxUnavailable or minAvailable, not both"
type EnvoyDisruptionBudget struct {
	// MaxUnavailable is how many proxies may be unavailable at once during
	// voluntary disruptions. Defaults to 1 when minAvailable is not set.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? int(self) >= 0 : string(self).matches('^(100|[1-9]?[0-9])%$')",message="must be a number of proxies, 0 or more, or a percentage from 0% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MinAvailable is how many proxies must stay available during
	// voluntary disruptions.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? int(self) >= 0 : string(self).matches('^(100|[1-9]?[0-9])%$')",message="must be a number of proxies, 0 or more, or a percentage from 0% to 100%"
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// LabelValue is the value of a label. It is an alias, so that the fields
// stay map[string]string in Go; it exists for the bound on its length, without
// which the API server would refuse the validation of every value as too
// costly.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule="!format.labelValue().validate(self).hasValue()",message="must be a valid label value: empty, or at most 63 alphanumeric characters, '-', '_' or '.' that starts and ends with an alphanumeric character"
type LabelValue = string

// XDS names an xDS management server.
type XDS struct {
	// Name is the name of the bootstrap's static cluster that reaches the server.
	// +optional
	// +kubebuilder:default=xds_cluster
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.:-]+$`
	Name string `json:"name,omitempty"`

	// Host is the server's DNS name or IP address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue() || isIP(self)",message="must be a DNS name or an IP address"
	Host string `json:"host"`

	// Port is the server's gRPC port.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// EnvoyPort is one listener port of the fleet.
type EnvoyPort struct {
	// Name of the Service port.
	// +required
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="!format.dns1035Label().validate(self).hasValue()",message="must be a DNS-1035 label"
	// +kubebuilder:validation:XValidation:rule="!self.contains('--')",message="must be a valid container port name (IANA_SVC_NAME): no two '-' in a row"
	Name string `json:"name"`

	// Port is the Service's port.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// TargetPort is the port Envoy listens on in the pod. Defaults to Port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	TargetPort int32 `json:"targetPort,omitempty"`
}

// TargetPortOrPort returns the port Envoy listens on for p.
func (p EnvoyPort) TargetPortOrPort() int32 {
	if p.TargetPort != 0 {
		return p.TargetPort
	}
	return p.Port
}

// EnvoyStatus is the observed state of a fleet.
type EnvoyStatus struct {
	// Replicas is the number of the fleet's pods.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of ready pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// AvailableReplicas is the number of pods ready for at least minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
	// ObservedGeneration is the generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Selector is the label selector of the fleet's pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// BootstrapHash is the hash of the bootstrap in the ConfigMap; pods carry
	// it as an annotation, so a bootstrap change rolls them.
	// +optional
	BootstrapHash string `json:"bootstrapHash,omitempty"`
	// XDSServer is the host:port of the xDS server the fleet uses.
	// +optional
	XDSServer string `json:"xdsServer,omitempty"`
	// Conditions: Available, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Envoy is a fleet of Envoy proxies: a Deployment whose pods run Envoy with a
// generated bootstrap, a Service in front of them, and an xDS server that
// configures them.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=evy,categories=kec
// +kubebuilder:validation:XValidation:rule="has(self.spec.name) || !format.dns1035Label().validate(self.metadata.name).hasValue()",message="metadata.name must be a DNS-1035 label when spec.name is not set: it names the fleet's Service"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters: it is used as a label value"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="xDS",type=string,JSONPath=`.status.xdsServer`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="The Available condition: the fleet's Deployment has its minimum of available pods"
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`,description="The Degraded condition: the spec is invalid or a resource the fleet needs belongs to someone else"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Envoy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EnvoySpec   `json:"spec,omitempty"`
	Status EnvoyStatus `json:"status,omitempty"`
}

// EnvoyList is a list of Envoys.
// +kubebuilder:object:root=true
type EnvoyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Envoy `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&Envoy{}, &EnvoyList{}))
}

// GetConditions returns the status conditions.
func (o *Envoy) GetConditions() []metav1.Condition { return o.Status.Conditions }
