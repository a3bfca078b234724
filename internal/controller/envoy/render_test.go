package envoy

import (
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

var builtin = fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "builtin.svc", Port: 18000, MutualTLS: true}}

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
		{"rolled out", Observed{Deployment: dep(1, 3, 3, 3, 3)}, "True", "False", "False", conditions.AsExpected},
		{"rolling", Observed{Deployment: dep(1, 3, 1, 1, 1)}, "False", "True", "False", conditions.AsExpected},
		{"no deployment yet", Observed{}, "False", "True", "False", conditions.AsExpected},
		{"clash", Observed{Deployment: dep(1, 3, 3, 3, 3), Problem: &conditions.Problem{Reason: conditions.ResourceExists, Message: "taken"}}, "True", "False", "True", conditions.ResourceExists},
		{"invalid", Observed{Problem: invalidSpec(errors.New("bad"))}, "False", "False", "True", conditions.InvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := seedSample()
			tt.obs.Desired = Children{BootstrapHash: "h", XDS: fleet.XDSServer(e, builtin)}
			st := Status(e, tt.obs)
			for typ, want := range map[string]metav1.ConditionStatus{conditions.Available: tt.available, conditions.Progressing: tt.prog, conditions.Degraded: tt.deg} {
				if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != want {
					t.Errorf("%s = %+v, want %s", typ, c, want)
				}
			}
			if c := meta.FindStatusCondition(st.Conditions, conditions.Degraded); c.Reason != tt.degReason {
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
