//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// The sample Watcher and an Envoy fleet's sidecar are injected into the pods
// of a Deployment in a namespace that enables injection.
func TestWatcherInjection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	ns := namespace(t, "e2e-watcher")
	kubectl.Run(t, "label", "namespace", ns, "kube-envoy-controller.io/injection=enabled")
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("watch_v1alpha1_watcher.yaml"))
	kubectl.WaitJSONPath(t, time.Minute, ns, "watcher/log-watcher", "{.status.configMapName}", "log-watcher-config")
	kubectl.WaitJSONPath(t, time.Minute, ns, "configmap/log-watcher-config", "{.data.LOG_LEVEL}", "info")
	step("Watcher ready")

	fleet := &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "mesh", Namespace: ns},
		Spec:       examplev1.EnvoySpec{Replicas: ptr.To[int32](0)},
	}
	if err := k8s.Create(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	kubectl.WaitJSONPath(t, time.Minute, ns, "configmap/mesh-bootstrap", "{.metadata.ownerReferences[0].name}", "mesh")
	step("Envoy fleet's bootstrap ready")

	// The webhook serves once its certificate is generated and its CA is in
	// the webhook configuration: a dry run then comes back injected.
	framework.Eventually(t, 2*time.Minute, "the webhook to inject", func() (bool, error) {
		out, err := kubectl.Out("-n", ns, "run", "probe",
			"--image=nginx", "--dry-run=server", "--annotations=watch.my.domain/inject=log-watcher",
			"-o", "jsonpath={.spec.containers[*].name}")
		if err != nil {
			return false, err
		}
		return out == "probe log-watcher", fmt.Errorf("containers %q", out)
	})
	step("webhook serving")

	// A pod that brings the webhook's record itself gets the sidecar all the same.
	out, err := kubectl.Out("-n", ns, "run", "forged",
		"--image=nginx", "--dry-run=server", "--annotations=watch.my.domain/inject=log-watcher",
		"--annotations=watch.my.domain/injected=log-watcher", "-o", "jsonpath={.spec.containers[*].name}")
	if err != nil || out != "forged log-watcher" {
		t.Errorf("a pod with its own record of the injection: %v: containers %q, want forged log-watcher", err, out)
	}

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					"watch.my.domain/inject":    "log-watcher",
					"example.com/envoy-sidecar": "mesh",
				}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
	if err := k8s.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "pods -l app=web", "{.items[*].status.phase}", "Running Running")
	// The Envoy sidecar is a native sidecar, an init container that keeps
	// running, ordered before the application; the Watcher's sidecar is a
	// container, as the seed's.
	kubectl.WaitJSONPath(t, time.Minute, ns, "pods -l app=web",
		`{range .items[*]}{.spec.initContainers[*].name}{"/"}{.spec.initContainers[*].restartPolicy}{"/"}{.spec.containers[*].name}{";"}{end}`,
		"envoy/Always/app log-watcher;envoy/Always/app log-watcher;")
	kubectl.WaitJSONPath(t, time.Minute, ns, "pods -l app=web", `{.items[*].metadata.annotations.watch\.my\.domain/injected}`,
		"log-watcher log-watcher")
	step("Deployment's pods run with the sidecars")

	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		checkSidecars(t, &p)
	}

	// A Watcher that does not exist is denied, by name.
	out, err = kubectl.Out("-n", ns, "run", "denied",
		"--image=nginx", "--annotations=watch.my.domain/inject=no-such-watcher")
	if err == nil || !strings.Contains(out, `Watcher "no-such-watcher", which does not exist`) {
		t.Errorf("a pod naming a missing Watcher: %v: %s", err, out)
	}
	step("missing Watcher denied")
}

// checkSidecars checks one injected pod: the Watcher's container takes its
// environment from the Watcher's ConfigMap and mounts its volume, and the
// Envoy sidecar mounts the fleet's bootstrap and joins the fleet.
func checkSidecars(t *testing.T, p *corev1.Pod) {
	t.Helper()
	byName := map[string]corev1.Container{}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		byName[c.Name] = c
	}
	lw := byName["log-watcher"]
	if len(lw.EnvFrom) != 1 || lw.EnvFrom[0].ConfigMapRef == nil || lw.EnvFrom[0].ConfigMapRef.Name != "log-watcher-config" {
		t.Errorf("pod %s: log-watcher envFrom = %+v", p.Name, lw.EnvFrom)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		volumes[v.Name] = v
	}
	if v, ok := volumes["app-logs"]; !ok || v.EmptyDir == nil {
		t.Errorf("pod %s: no app-logs emptyDir volume", p.Name)
	}
	if v, ok := volumes["envoy-bootstrap"]; !ok || v.ConfigMap == nil || v.ConfigMap.Name != "mesh-bootstrap" {
		t.Errorf("pod %s: envoy-bootstrap volume = %+v, want ConfigMap mesh-bootstrap", p.Name, v)
	}
	envoy := byName["envoy"]
	mounted := false
	for _, m := range envoy.VolumeMounts {
		mounted = mounted || (m.Name == "envoy-bootstrap" && m.MountPath == "/etc/envoy")
	}
	if !mounted {
		t.Errorf("pod %s: the bootstrap is not mounted at /etc/envoy: %+v", p.Name, envoy.VolumeMounts)
	}
	if args := strings.Join(envoy.Args, " "); !strings.Contains(args, "--service-cluster "+p.Namespace+"/mesh") ||
		!strings.Contains(args, "--service-node $(POD_NAME)") {
		t.Errorf("pod %s: envoy args = %s", p.Name, args)
	}
}
