package envoy

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/vocabulary"
)

var builtin = fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "builtin.svc", Port: 18000, MutualTLS: true},
	Namespace: caNamespace, XDSPorts: []int32{18000}}

// seedSample is config/samples/example_v1_envoy.yaml.
func seedSample() *examplev1.Envoy {
	return &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-envoy", Namespace: "default", UID: "uid-1", Generation: 1},
		Spec: examplev1.EnvoySpec{
			Name: "webserver-beta", ConfigMapName: "envoy-cfg-1", Replicas: ptr.To[int32](3),
			XDS: &examplev1.XDS{Name: "xds_cluster", Host: "xds-service.default", Port: 19000},
		},
	}
}

// desired renders e's children, failing the test if it cannot.
func desired(t *testing.T, e *examplev1.Envoy) Children {
	t.Helper()
	c, err := Desired(e, builtin)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	bare := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns"}}
	c := desired(t, bare)
	if c.XDS != builtin.XDS {
		t.Errorf("a fleet without spec.xds must use the built-in server, got %v", c.XDS)
	}
	d := c.Deployment
	ctr := d.Spec.Template.Spec.Containers[0]
	if d.Name != "bare" || c.ConfigMap.Name != "bare-bootstrap" || c.Service.Name != "bare" {
		t.Errorf("names = %s, %s, %s", d.Name, c.ConfigMap.Name, c.Service.Name)
	}
	if ctr.Image != fleet.DefaultImage || !slices.Contains(ctr.Args, fleet.DefaultLogLevel) || *d.Spec.Replicas != 1 {
		t.Errorf("defaults: image %s args %v replicas %d", ctr.Image, ctr.Args, *d.Spec.Replicas)
	}
	svc := c.Service
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.IntVal != 8080 {
		t.Errorf("default service = %+v", svc.Spec)
	}
	if c.BootstrapHash != proxy.Hash([]byte(c.ConfigMap.Data[proxy.BootstrapKey])) {
		t.Errorf("the bootstrap hash is not the ConfigMap's bootstrap's")
	}
}

func TestDeployment(t *testing.T) {
	e := seedSample()
	e.Spec.PodLabels = map[string]string{"team": "edge"}
	e.Spec.PodAnnotations = map[string]string{"note": "x"}
	c := desired(t, e)
	d := c.Deployment

	if d.Name != "webserver-beta" || metav1.GetControllerOf(d).UID != "uid-1" {
		t.Errorf("name %s, owner %v", d.Name, d.OwnerReferences)
	}
	pod := d.Spec.Template
	for k, v := range map[string]string{
		"app.kubernetes.io/name": "envoy", "app.kubernetes.io/instance": "edge-envoy",
		"app.kubernetes.io/managed-by": "kube-envoy-controller", "team": "edge",
	} {
		if pod.Labels[k] != v {
			t.Errorf("pod label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	sel, _ := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if !sel.Matches(labels.Set(pod.Labels)) || sel.Matches(labels.Set(map[string]string{"app.kubernetes.io/name": "envoy", "app.kubernetes.io/instance": "other"})) {
		t.Errorf("selector %s must select this fleet's pods only", sel)
	}
	if pod.Annotations[fleet.BootstrapHashAnnotation] != c.BootstrapHash || pod.Annotations["note"] != "x" ||
		pod.Annotations["prometheus.io/path"] != "/stats/prometheus" || pod.Annotations["prometheus.io/port"] != "19001" {
		t.Errorf("pod annotations = %v", pod.Annotations)
	}
	ctr := pod.Spec.Containers[0]
	wantArgs := []string{"-c", "/etc/envoy/envoy.yaml", "--service-node", "$(POD_NAME)", "--service-cluster", "default/edge-envoy"}
	if !slices.Equal(ctr.Args[:len(wantArgs)], wantArgs) {
		t.Errorf("args = %v", ctr.Args)
	}
	if ctr.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME must come from the downward API: %+v", ctr.Env[0])
	}
	if p := ctr.ReadinessProbe.HTTPGet; p.Path != "/ready" || p.Port.IntVal != proxy.ReadyPort {
		t.Errorf("readiness probe = %+v", p)
	}
	sc := ctr.SecurityContext
	if !*sc.RunAsNonRoot || *sc.RunAsUser != proxy.UID || *sc.RunAsGroup != proxy.UID || !*sc.ReadOnlyRootFilesystem ||
		*sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("security context = %+v, want uid %d, read-only, every capability dropped", sc, proxy.UID)
	}
	if v := pod.Spec.Volumes[0].ConfigMap; v == nil || v.Name != "envoy-cfg-1" {
		t.Errorf("bootstrap volume = %+v", pod.Spec.Volumes[0])
	}
	if pod.Spec.SecurityContext.Sysctls != nil {
		t.Errorf("no sysctl is needed for port 8080")
	}
	e.Spec.Ports = []examplev1.EnvoyPort{{Name: "http", Port: 80, TargetPort: 80}}
	if s := desired(t, e).Deployment.Spec.Template.Spec.SecurityContext.Sysctls; len(s) != 1 {
		t.Errorf("a listener on port 80 needs ip_unprivileged_port_start: %v", s)
	}
}

func TestServiceAndConfigMap(t *testing.T) {
	e := seedSample()
	e.Spec.ServiceType = corev1.ServiceTypeNodePort
	e.Spec.Ports = []examplev1.EnvoyPort{{Name: "http", Port: 80, TargetPort: 8080}, {Name: "https", Port: 443}}
	c := desired(t, e)
	s := c.Service
	if s.Name != "webserver-beta" || s.Spec.Type != corev1.ServiceTypeNodePort || len(s.Spec.Ports) != 2 ||
		s.Spec.Ports[1].TargetPort.IntVal != 443 {
		t.Errorf("service = %+v", s.Spec)
	}
	if s.Spec.Selector["app.kubernetes.io/instance"] != "edge-envoy" {
		t.Errorf("selector = %v", s.Spec.Selector)
	}
	cm := c.ConfigMap
	if _, err := proxy.ParseBootstrap([]byte(cm.Data["envoy.yaml"])); err != nil || cm.Name != "envoy-cfg-1" || metav1.GetControllerOf(cm) == nil {
		t.Errorf("configmap = %+v", cm)
	}
}

func TestStatus(t *testing.T) {
	dep := func(observed int64, replicas, updated, ready, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: appsv1.DeploymentStatus{
			ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}}
	}
	tests := []struct {
		name                 string
		obs                  Observed
		available, prog, deg metav1.ConditionStatus
		degReason            string
	}{
		{"rolled out", Observed{Deployment: dep(1, 3, 3, 3, 3)}, "True", "False", "False", examplev1.EnvoyReasonAsExpected},
		{"rolling", Observed{Deployment: dep(1, 3, 1, 1, 1)}, "False", "True", "False", examplev1.EnvoyReasonAsExpected},
		{"no deployment yet", Observed{}, "False", "True", "False", examplev1.EnvoyReasonAsExpected},
		{"clash", Observed{Deployment: dep(1, 3, 3, 3, 3), Problem: &conditions.Problem{Reason: examplev1.EnvoyReasonErrResourceExists, Message: "taken"}}, "True", "False", "True", examplev1.EnvoyReasonErrResourceExists},
		{"invalid", Observed{Problem: invalidSpec(errors.New("bad"))}, "False", "False", "True", examplev1.EnvoyReasonInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := seedSample()
			e.Generation = 4
			tt.obs.Desired = Children{BootstrapHash: "h", XDS: fleet.XDSServer(e, builtin)}
			st := Status(e, tt.obs)
			vocabulary.Check(t, e, st.Conditions)
			if st.ObservedGeneration != 4 {
				t.Errorf("observedGeneration = %d, want 4", st.ObservedGeneration)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 4 {
					t.Errorf("condition %s observedGeneration = %d, want 4", c.Type, c.ObservedGeneration)
				}
			}
			for typ, want := range map[string]metav1.ConditionStatus{examplev1.EnvoyConditionAvailable: tt.available, examplev1.EnvoyConditionProgressing: tt.prog, examplev1.EnvoyConditionDegraded: tt.deg} {
				if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != want {
					t.Errorf("%s = %+v, want %s", typ, c, want)
				}
			}
			if c := meta.FindStatusCondition(st.Conditions, examplev1.EnvoyConditionDegraded); c.Reason != tt.degReason {
				t.Errorf("Degraded reason = %s, want %s", c.Reason, tt.degReason)
			}
			if st.Selector != "app.kubernetes.io/instance=edge-envoy,app.kubernetes.io/name=envoy" || st.XDSServer != "xds-service.default:19000" || st.BootstrapHash != "h" {
				t.Errorf("status = %+v", st)
			}
			// Recomputing from the same observation changes nothing: no write when settled.
			e.Status = st
			if again := Status(e, tt.obs); !slices.Equal(again.Conditions, st.Conditions) {
				t.Errorf("status is not stable: %+v -> %+v", st.Conditions, again.Conditions)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// renderCases are specs whose children are kept as golden files: one for
// every field that shapes the pods, the budget or the autoscaler. A golden
// Deployment that changes is a pod template that changes: every existing
// fleet of that spec rolls when the operator is upgraded. The diff of
// `go test ./internal/controller/envoy -update` says which, for review.
var renderCases = []struct {
	name   string
	mutate func(*examplev1.Envoy)
}{
	{"seed-sample", func(*examplev1.Envoy) {}},
	{"built-in-server", func(e *examplev1.Envoy) { e.Spec.XDS, e.Spec.Replicas = nil, nil }},
	{"egress-allowlist", func(e *examplev1.Envoy) {
		e.Spec.XDS = nil
		e.Spec.Egress = &examplev1.EnvoyEgress{Allowed: &examplev1.EnvoyEgressAllowlist{
			CIDRs:   []string{"10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/24", "fd00::/8"},
			Domains: []string{"*.example.com"},
		}}
	}},
	{"egress-domains-only", func(e *examplev1.Envoy) {
		e.Spec.XDS = nil
		e.Spec.Egress = &examplev1.EnvoyEgress{Allowed: &examplev1.EnvoyEgressAllowlist{Domains: []string{"api.example.com"}}}
	}},
	{"egress-network-policy-disabled", func(e *examplev1.Envoy) {
		e.Spec.XDS = nil
		e.Spec.Egress = &examplev1.EnvoyEgress{NetworkPolicy: examplev1.EnvoyNetworkPolicyDisabled}
	}},
	{"one-replica", func(e *examplev1.Envoy) { e.Spec.Replicas = ptr.To[int32](1) }},
	{"one-replica-budget", func(e *examplev1.Envoy) {
		e.Spec.Replicas = ptr.To[int32](1)
		e.Spec.PodDisruptionBudget = &examplev1.EnvoyDisruptionBudget{}
	}},
	{"budget-min-available", func(e *examplev1.Envoy) {
		e.Spec.PodDisruptionBudget = &examplev1.EnvoyDisruptionBudget{MinAvailable: ptr.To(intstr.FromString("50%"))}
	}},
	{"drain-off", func(e *examplev1.Envoy) { e.Spec.DrainSeconds = ptr.To[int32](0) }},
	{"drain-and-grace", func(e *examplev1.Envoy) {
		e.Spec.DrainSeconds = ptr.To[int32](5)
		e.Spec.TerminationGracePeriodSeconds = ptr.To[int64](120)
	}},
	{"spread", func(e *examplev1.Envoy) {
		e.Spec.TopologySpreadConstraints = []examplev1.EnvoySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			MinDomains: ptr.To[int32](3), NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
		}}
	}},
	{"autoscaling", func(e *examplev1.Envoy) {
		e.Spec.Replicas = ptr.To[int32](1)
		e.Spec.Autoscaling = &examplev1.EnvoyAutoscaling{MaxReplicas: 10}
		e.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	}},
	{"autoscaling-tuned", func(e *examplev1.Envoy) {
		e.Spec.Autoscaling = &examplev1.EnvoyAutoscaling{MinReplicas: ptr.To[int32](3), MaxReplicas: 6, TargetCPUUtilizationPercentage: ptr.To[int32](60)}
		e.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	}},
	// A fleet of the built-in server with a rollout: its bootstrap declares
	// the stats sink, which rolls its pods (the bootstrap's hash).
	{"config-rollout", func(e *examplev1.Envoy) {
		e.Spec.XDS = nil
		e.Spec.ConfigRollout = configRollout()
	}},
	// A fleet of another xDS server with a rollout: nothing changes (the
	// children are seed-sample's).
	{"config-rollout-external-xds", func(e *examplev1.Envoy) { e.Spec.ConfigRollout = configRollout() }},
	{"memory-limit", func(e *examplev1.Envoy) {
		e.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
	}},
}

// renderYAML is every child of c, as the documents of one YAML file.
func renderYAML(t *testing.T, c Children) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, obj := range []client.Object{c.ConfigMap, c.Deployment, c.Service, c.PodDisruptionBudget, c.HorizontalPodAutoscaler, c.NetworkPolicy} {
		if reflect.ValueOf(obj).IsNil() {
			continue
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "# %T\n---\n%s", obj, b)
	}
	return out.Bytes()
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			e := seedSample()
			tc.mutate(e)
			got := renderYAML(t, desired(t, e))
			golden := filepath.Join("testdata", "render", tc.name+".yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/controller/envoy -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the children differ from %s; run go test ./internal/controller/envoy -update and review the diff.\ngot:\n%s", golden, got)
			}
			// Rendering is deterministic: an unchanged spec never writes.
			if again := renderYAML(t, desired(t, e)); !bytes.Equal(got, again) {
				t.Error("two renders differ")
			}
		})
	}
}

// A fleet drains, gets a grace period to match, and spreads over nodes and
// zones, by default; each can be changed.
func TestDrainGraceAndSpread(t *testing.T) {
	tests := []struct {
		name      string
		drain     *int32
		grace     *int64
		wantDrain int32
		wantGrace int64
	}{
		{"defaults", nil, nil, 60, 75},
		{"short drain", ptr.To[int32](5), nil, 5, 30},
		{"long drain", ptr.To[int32](600), nil, 600, 615},
		{"no drain", ptr.To[int32](0), nil, 0, 30},
		{"grace set", ptr.To[int32](20), ptr.To[int64](300), 20, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := seedSample()
			e.Spec.DrainSeconds, e.Spec.TerminationGracePeriodSeconds = tt.drain, tt.grace
			pod := desired(t, e).Deployment.Spec.Template.Spec
			if g := *pod.TerminationGracePeriodSeconds; g != tt.wantGrace {
				t.Errorf("grace period %d, want %d", g, tt.wantGrace)
			}
			ctr := pod.Containers[0]
			if tt.wantDrain == 0 {
				if ctr.Lifecycle != nil || slices.Contains(ctr.Args, "--drain-time-s") {
					t.Errorf("no drain, yet lifecycle %+v, args %v", ctr.Lifecycle, ctr.Args)
				}
				return
			}
			if ctr.Lifecycle == nil || !reflect.DeepEqual(ctr.Lifecycle.PreStop, proxy.DrainHook(tt.wantDrain)) {
				t.Errorf("preStop = %+v, want the drain hook of %ds", ctr.Lifecycle, tt.wantDrain)
			}
			i := slices.Index(ctr.Args, "--drain-time-s")
			if i < 0 || ctr.Args[i+1] != strconv.Itoa(int(tt.wantDrain)) {
				t.Errorf("args %v, want --drain-time-s %d", ctr.Args, tt.wantDrain)
			}
			// The hook's last check comes before the kubelet's kill.
			if int64(tt.wantDrain)+5 > tt.wantGrace {
				t.Errorf("a drain of %ds does not fit a grace period of %ds", tt.wantDrain, tt.wantGrace)
			}
		})
	}

	e := seedSample()
	spread := desired(t, e).Deployment.Spec.Template.Spec.TopologySpreadConstraints
	sel := &metav1.LabelSelector{MatchLabels: fleet.SelectorLabels(e)}
	want := []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel, MatchLabelKeys: []string{"pod-template-hash"}},
		{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel, MatchLabelKeys: []string{"pod-template-hash"}},
	}
	if !reflect.DeepEqual(spread, want) {
		t.Errorf("default spread = %+v", spread)
	}
	e.Spec.TopologySpreadConstraints = []examplev1.EnvoySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}
	spread = desired(t, e).Deployment.Spec.Template.Spec.TopologySpreadConstraints
	if len(spread) != 1 || spread[0].TopologyKey != "rack" || spread[0].MaxSkew != 2 || spread[0].WhenUnsatisfiable != corev1.DoNotSchedule ||
		!reflect.DeepEqual(spread[0].LabelSelector, sel) {
		t.Errorf("the spec's spread replaces the default: %+v", spread)
	}
}

// A fleet that can have two proxies or more gets a budget of one proxy at a
// time; a smaller one none, unless its spec asks.
func TestDisruptionBudget(t *testing.T) {
	one := intstr.FromInt32(1)
	tests := []struct {
		name     string
		replicas int32
		spec     *examplev1.EnvoyDisruptionBudget
		scale    *examplev1.EnvoyAutoscaling
		wantMax  *intstr.IntOrString
		wantMin  *intstr.IntOrString
		none     bool
	}{
		{"zero", 0, nil, nil, nil, nil, true},
		{"one", 1, nil, nil, nil, nil, true},
		{"two", 2, nil, nil, &one, nil, false},
		{"one, asked", 1, &examplev1.EnvoyDisruptionBudget{}, nil, &one, nil, false},
		{"one, autoscaled to two", 1, nil, &examplev1.EnvoyAutoscaling{MaxReplicas: 2}, &one, nil, false},
		{"one, autoscaled to one", 1, nil, &examplev1.EnvoyAutoscaling{MaxReplicas: 1}, nil, nil, true},
		{"percentage", 4, &examplev1.EnvoyDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("25%"))}, nil, ptr.To(intstr.FromString("25%")), nil, false},
		{"min available", 4, &examplev1.EnvoyDisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(3))}, nil, nil, ptr.To(intstr.FromInt32(3)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := seedSample()
			e.Spec.Replicas, e.Spec.PodDisruptionBudget, e.Spec.Autoscaling = &tt.replicas, tt.spec, tt.scale
			pdb := desired(t, e).PodDisruptionBudget
			if tt.none {
				if pdb != nil {
					t.Errorf("budget %+v, want none", pdb.Spec)
				}
				return
			}
			if pdb == nil {
				t.Fatal("no budget")
			}
			s := pdb.Spec
			if pdb.Name != "webserver-beta" || metav1.GetControllerOf(pdb).UID != "uid-1" || !reflect.DeepEqual(s.Selector.MatchLabels, fleet.SelectorLabels(e)) ||
				!reflect.DeepEqual(s.MaxUnavailable, tt.wantMax) || !reflect.DeepEqual(s.MinAvailable, tt.wantMin) ||
				*s.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
				t.Errorf("budget %s = %+v", pdb.Name, s)
			}
		})
	}
}

// spec.autoscaling renders an autoscaler of the Envoy itself, through its
// scale subresource, on the proxies' CPU.
func TestAutoscaler(t *testing.T) {
	e := seedSample()
	if desired(t, e).HorizontalPodAutoscaler != nil {
		t.Error("an autoscaler without spec.autoscaling")
	}
	e.Spec.Autoscaling = &examplev1.EnvoyAutoscaling{MaxReplicas: 5}
	hpa := desired(t, e).HorizontalPodAutoscaler
	ref := hpa.Spec.ScaleTargetRef
	if hpa.Name != "webserver-beta" || metav1.GetControllerOf(hpa).UID != "uid-1" ||
		ref.APIVersion != "example.com/v1" || ref.Kind != "Envoy" || ref.Name != "edge-envoy" {
		t.Errorf("autoscaler %s targets %+v", hpa.Name, ref)
	}
	m := hpa.Spec.Metrics
	if *hpa.Spec.MinReplicas != 1 || hpa.Spec.MaxReplicas != 5 || len(m) != 1 || m[0].Resource.Name != corev1.ResourceCPU ||
		m[0].Resource.Target.Type != autoscalingv2.UtilizationMetricType || *m[0].Resource.Target.AverageUtilization != 80 {
		t.Errorf("autoscaler spec = %+v", hpa.Spec)
	}
	e.Spec.Autoscaling = &examplev1.EnvoyAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 4, TargetCPUUtilizationPercentage: ptr.To[int32](50)}
	hpa = desired(t, e).HorizontalPodAutoscaler
	if *hpa.Spec.MinReplicas != 2 || hpa.Spec.MaxReplicas != 4 || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 50 {
		t.Errorf("autoscaler spec = %+v", hpa.Spec)
	}
	// The Deployment follows spec.replicas, which the autoscaler writes.
	e.Spec.Replicas = ptr.To[int32](3)
	if r := *desired(t, e).Deployment.Spec.Replicas; r != 3 {
		t.Errorf("Deployment replicas %d, want spec.replicas 3", r)
	}
}

// The bootstrap's heap limit follows the container's memory limit.
func TestBootstrapHeapLimit(t *testing.T) {
	e := seedSample()
	heap := func() uint64 {
		b, err := proxy.ParseBootstrap([]byte(desired(t, e).ConfigMap.Data[proxy.BootstrapKey]))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range b.GetOverloadManager().GetResourceMonitors() {
			if m.GetName() == "envoy.resource_monitors.fixed_heap" {
				c := &fixedheapv3.FixedHeapConfig{}
				if err := m.GetTypedConfig().UnmarshalTo(c); err != nil {
					t.Fatal(err)
				}
				return c.GetMaxHeapSizeBytes()
			}
		}
		return 0
	}
	if h := heap(); h != 0 {
		t.Errorf("heap limit %d without a memory limit", h)
	}
	e.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	if h := heap(); h != proxy.MaxHeapBytes(1<<30) {
		t.Errorf("heap limit %d, want %d", h, proxy.MaxHeapBytes(1<<30))
	}
}

// This release adds the drain, the grace period, the spread and the
// bootstrap's limits to the pods of existing fleets: upgrading the operator
// rolls each fleet once, in one update of its Deployment, which then
// matches. testdata/previous-release holds what the release before rendered
// for the seed sample.
func TestUpgradeFromPreviousReleaseRollsOnce(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "previous-release", "seed-sample.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	prev := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict([]byte(docs[len(docs)-1]), prev); err != nil || prev.Name != "webserver-beta" {
		t.Fatalf("the previous release's Deployment: %v", err)
	}
	want := desired(t, seedSample()).Deployment
	if same, err := objects.Deployments.Matches(prev, want); err != nil || same {
		t.Fatalf("the previous release's Deployment matches this release's (%v): the test no longer tells of the upgrade", err)
	}
	merged := objects.Deployments.Merge(prev, want)
	if same, err := objects.Deployments.Matches(merged, want); err != nil || !same {
		t.Errorf("after one update the Deployment still differs (%v)", err)
	}
	if *merged.Spec.Replicas != *prev.Spec.Replicas {
		t.Errorf("the upgrade changes replicas: %d -> %d", *prev.Spec.Replicas, *merged.Spec.Replicas)
	}
}
