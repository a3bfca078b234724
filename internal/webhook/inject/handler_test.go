package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var suite testenv.Suite

// operatorNamespace is the operator's own namespace, which the generated
// configuration leaves out and the injector never changes.
const operatorNamespace = "kube-envoy-controller"

// labellerPath serves a second mutating webhook, called after the injector,
// that adds a label: the API server does not call the injector again.
const labellerPath = "/test-add-label"

// unselectedLabel on a pod sends it to the injector through a configuration
// without the namespaceSelector, in any namespace.
const unselectedLabel = "test/unselected"

func TestMain(m *testing.M) {
	hooks, _, err := testenv.WebhookManifests()
	if err == nil && len(hooks) != 1 {
		err = fmt.Errorf("config/webhook/manifests.yaml: want one mutating configuration, found %d", len(hooks))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	labeller := hooks[0].DeepCopy()
	labeller.Name = "zz-test-labeller" // called after kube-envoy-controller-injector
	labeller.Webhooks[0].Name = "labeller.test.my.domain"
	labeller.Webhooks[0].ClientConfig.Service.Path = ptr.To(labellerPath)
	labeller.Webhooks[0].ReinvocationPolicy = ptr.To(admissionv1.NeverReinvocationPolicy)
	// The injector's configuration as someone might install or edit it:
	// without the namespaceSelector, for the pods labelled unselected.
	unselected := hooks[0].DeepCopy()
	unselected.Name = "zz-test-unselected"
	unselected.Webhooks[0].Name = "unselected.test.my.domain"
	unselected.Webhooks[0].NamespaceSelector = nil
	unselected.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{unselectedLabel: "true"}}
	suite.Webhooks = append(hooks, labeller, unselected)

	suite.Main(m, func(mgr ctrl.Manager) error {
		mgr.GetWebhookServer().Register(labellerPath, &admission.Webhook{Handler: admission.HandlerFunc(addLabel)})
		hook, err := NewWebhook(mgr, operatorNamespace, fleet.Defaults{})
		if err != nil {
			return err
		}
		mgr.GetWebhookServer().Register(Path, hook)
		return nil
	})
}

func addLabel(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Labels["test/labelled"] == "true" {
		return admission.Allowed("")
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["test/labelled"] = "true"
	raw, _ := json.Marshal(pod)
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// waitForServer waits until the suite's webhook server accepts connections.
func waitForServer(t *testing.T) {
	t.Helper()
	testenv.WaitServing(t, suite.Manager)
}

// namespace creates a namespace, in the webhook's scope when enabled.
func namespace(t *testing.T, enabled bool) string {
	t.Helper()
	waitForServer(t)
	ns := suite.Namespace(t)
	if enabled {
		enable(t, ns)
	}
	return ns
}

// enable puts ns in the webhook's scope. A namespace the test did not create
// (kube-system, the operator's) is taken out of scope again when the test ends,
// so that no later test inherits the label.
func enable(t *testing.T, ns string) {
	t.Helper()
	setScope(t, ns, true)
	if !strings.HasPrefix(ns, "test-") {
		t.Cleanup(func() { setScope(t, ns, false) })
	}
}

func setScope(t *testing.T, ns string, enabled bool) {
	t.Helper()
	n := &corev1.Namespace{}
	if err := suite.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n); err != nil {
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		n.Name = ns
		if err := suite.Client.Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if enabled {
		n.Labels[NamespaceLabel] = NamespaceEnabled
	} else {
		delete(n.Labels, NamespaceLabel)
	}
	if err := suite.Client.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func createWatcher(t *testing.T, ns, name, container string, mutate ...func(*watchv1alpha1.Watcher)) {
	t.Helper()
	w := newWatcher(name, container, mutate...)
	w.Namespace = ns
	if err := suite.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

func podIn(ns string, annotations map[string]string) *corev1.Pod {
	p := newPod()
	p.Namespace = ns
	p.Annotations = annotations
	return p
}

// webhookRequests returns how many admission requests the injector has served.
func webhookRequests() float64 {
	families, _ := ctrlmetrics.Registry.Gather()
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == Path {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// annotateNamespace sets an annotation of ns.
func annotateNamespace(t *testing.T, ns, key, value string) {
	t.Helper()
	n := &corev1.Namespace{}
	if err := suite.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[key] = value
	if err := suite.Client.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func TestPodInEnabledNamespaceIsInjected(t *testing.T) {
	ns := namespace(t, true)
	annotateNamespace(t, ns, SelectorWatchersAnnotation, "metrics")
	createWatcher(t, ns, "logs", "tail", withVolume("logs"), withSecret("regcred"), func(w *watchv1alpha1.Watcher) {
		w.Spec.Container.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}}
	})
	createWatcher(t, ns, "metrics", "exporter", func(w *watchv1alpha1.Watcher) {
		w.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	})

	before := webhookRequests()
	pod := podIn(ns, map[string]string{InjectAnnotation: "logs"})
	if err := suite.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := containerNames(pod); got != "app,tail,exporter" {
		t.Errorf("containers = %s, want app,tail,exporter", got)
	}
	if got := volumeNames(pod); got != "data,logs" {
		t.Errorf("volumes = %s, want data,logs", got)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("imagePullSecrets = %v", pod.Spec.ImagePullSecrets)
	}
	if got := pod.Annotations[InjectedAnnotation]; got != "logs,metrics" {
		t.Errorf("%s = %q", InjectedAnnotation, got)
	}
	tail := pod.Spec.Containers[1]
	if len(tail.EnvFrom) != 1 || tail.EnvFrom[0].ConfigMapRef == nil || tail.EnvFrom[0].ConfigMapRef.Name != "logs-config" {
		t.Errorf("envFrom = %+v, want ConfigMap logs-config", tail.EnvFrom)
	}

	// The labeller changed the pod after the injector, and the API server
	// ran its built-in admission again; it did not call the injector again.
	if pod.Labels["test/labelled"] != "true" {
		t.Fatal("the labelling webhook did not run")
	}
	if n := webhookRequests() - before; n != 1 {
		t.Errorf("the injector was called %v times for one pod, want 1 (reinvocationPolicy Never)", n)
	}
}

func TestPodOutOfScopeIsUntouched(t *testing.T) {
	ctx := context.Background()
	plain := namespace(t, false)
	createWatcher(t, plain, "logs", "tail", func(w *watchv1alpha1.Watcher) { w.Spec.Selector = &metav1.LabelSelector{} })
	enable(t, "kube-system")
	enable(t, operatorNamespace)
	for _, ns := range []string{plain, "kube-system", operatorNamespace} {
		// It names a Watcher that does not exist: in scope, that is denied.
		pod := podIn(ns, map[string]string{InjectAnnotation: "logs,missing", EnvoySidecarAnnotation: "missing"})
		pod.Name = "" // a fresh name in the shared namespaces
		pod.GenerateName = "app-"
		if err := suite.Client.Create(ctx, pod); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
		if got := containerNames(pod); got != "app" || pod.Annotations[InjectedAnnotation] != "" {
			t.Errorf("namespace %s: containers %s, annotations %v: the pod was changed", ns, got, pod.Annotations)
		}
		if err := suite.Client.Delete(ctx, pod); err != nil {
			t.Error(err)
		}
	}
}

func TestMissingWatcherIsDenied(t *testing.T) {
	ns := namespace(t, true)
	createWatcher(t, ns, "logs", "tail")
	err := suite.Client.Create(context.Background(), podIn(ns, map[string]string{InjectAnnotation: "logs, no-such-watcher"}))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `Watcher "no-such-watcher", which does not exist in namespace`) {
		t.Fatalf("create = %v, want a denial naming Watcher no-such-watcher", err)
	}
}

func TestConflictIsDenied(t *testing.T) {
	ns := namespace(t, true)
	createWatcher(t, ns, "logs", "app") // the pod's own container is "app"
	err := suite.Client.Create(context.Background(), podIn(ns, map[string]string{InjectAnnotation: "logs"}))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot inject Watcher "logs": the pod already has a container named "app"`) {
		t.Fatalf("create = %v, want a denial naming the container", err)
	}
}

func TestEnvoySidecar(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, true)
	e := &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		Spec:       examplev1.EnvoySpec{XDS: &examplev1.XDS{Host: "xds", Port: 18000}},
	}
	if err := suite.Client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	pod := podIn(ns, map[string]string{EnvoySidecarAnnotation: "edge"})
	if err := suite.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The API server took it: a native sidecar, ahead of the application.
	if got, inits := containerNames(pod), initNames(pod); got != "app" || inits != "envoy" {
		t.Fatalf("containers = %s, init containers = %s, want app and envoy", got, inits)
	}
	if p := pod.Spec.InitContainers[0].RestartPolicy; p == nil || *p != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the sidecar's restartPolicy = %v, want Always", p)
	}
	if pod.Spec.InitContainers[0].StartupProbe == nil {
		t.Error("the sidecar has no startup probe")
	}
	if got := volumeNames(pod); got != "data,envoy-bootstrap,envoy-tmp" {
		t.Errorf("volumes = %s", got)
	}
	if v := pod.Spec.Volumes[1]; v.ConfigMap == nil || v.ConfigMap.Name != "edge-bootstrap" {
		t.Errorf("bootstrap volume = %+v, want ConfigMap edge-bootstrap", v)
	}
	if args := strings.Join(pod.Spec.InitContainers[0].Args, " "); !strings.Contains(args, "--service-cluster "+fleet.ID{Namespace: ns, Name: "edge"}.String()) {
		t.Errorf("args = %s, want the fleet's identity as cluster", args)
	}
	if pod.Annotations[EnvoySidecarInjectedAnnotation] != "edge" {
		t.Errorf("annotations = %v", pod.Annotations)
	}

	err := suite.Client.Create(ctx, podIn(ns, map[string]string{EnvoySidecarAnnotation: "no-such-fleet"}))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `Envoy "no-such-fleet", which does not exist`) {
		t.Fatalf("create = %v, want a denial naming Envoy no-such-fleet", err)
	}
}

// A Watcher's sidecar is one of the pod's containers, as the seed's; one
// that asks for a native sidecar is an init container with restartPolicy
// Always, before the pod's own init containers, and the API server takes it.
func TestNativeSidecarWatcher(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, true)
	createWatcher(t, ns, "logs", "tail")
	createWatcher(t, ns, "shipper", "ship", func(w *watchv1alpha1.Watcher) { w.Spec.NativeSidecar = true })
	pod := podIn(ns, map[string]string{InjectAnnotation: "logs,shipper"})
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	if err := suite.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got, inits := containerNames(pod), initNames(pod); got != "app,tail" || inits != "ship,setup" {
		t.Fatalf("containers = %s, init containers = %s, want app,tail and ship,setup", got, inits)
	}
	if p := pod.Spec.InitContainers[0].RestartPolicy; p == nil || *p != corev1.ContainerRestartPolicyAlways {
		t.Errorf("ship's restartPolicy = %v, want Always", p)
	}
	if p := pod.Spec.Containers[1].RestartPolicy; p != nil {
		t.Errorf("tail's restartPolicy = %v, want none", *p)
	}
}

// A Watcher whose selector matches a pod that does not name it is injected
// only when the namespace lists it, or lists "*".
func TestSelectorNeedsTheNamespacesConsent(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, true)
	createWatcher(t, ns, "everyone", "grabber", func(w *watchv1alpha1.Watcher) { w.Spec.Selector = &metav1.LabelSelector{} })
	createWatcher(t, ns, "web", "exporter", func(w *watchv1alpha1.Watcher) {
		w.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	})
	createWatcher(t, ns, "logs", "tail")

	create := func(name string, annotations map[string]string) *corev1.Pod {
		t.Helper()
		pod := podIn(ns, annotations)
		pod.Name = name
		if err := suite.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	// The namespace lets no Watcher inject by selector: only what the pod names.
	if p := create("none", map[string]string{InjectAnnotation: "logs"}); containerNames(p) != "app,tail" || p.Annotations[InjectedAnnotation] != "logs" {
		t.Errorf("no Watcher permitted: containers %s, %s %q; want app,tail and logs", containerNames(p), InjectedAnnotation, p.Annotations[InjectedAnnotation])
	}
	// A pod may still name a Watcher that has a selector.
	if p := create("asks", map[string]string{InjectAnnotation: "everyone"}); containerNames(p) != "app,grabber" {
		t.Errorf("a pod naming a selecting Watcher: containers %s, want app,grabber", containerNames(p))
	}

	annotateNamespace(t, ns, SelectorWatchersAnnotation, "web")
	if p := create("one", nil); containerNames(p) != "app,exporter" || p.Annotations[InjectedAnnotation] != "web" {
		t.Errorf("Watcher web permitted: containers %s, %s %q; want app,exporter and web", containerNames(p), InjectedAnnotation, p.Annotations[InjectedAnnotation])
	}

	annotateNamespace(t, ns, SelectorWatchersAnnotation, "*")
	if p := create("all", nil); containerNames(p) != "app,grabber,exporter" {
		t.Errorf("every Watcher permitted: containers %s, want app,grabber,exporter", containerNames(p))
	}
}

// A pod that brings the annotations recording injected sidecars is injected
// all the same, and its records are the webhook's. (Injecting the stored pod
// again adding nothing is TestInject's.)
func TestPodsOwnRecordsSkipNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, true)
	annotateNamespace(t, ns, SelectorWatchersAnnotation, "audit")
	createWatcher(t, ns, "audit", "auditor", withVolume("audit"), func(w *watchv1alpha1.Watcher) {
		w.Spec.Selector = &metav1.LabelSelector{}
		w.Spec.Container.VolumeMounts = []corev1.VolumeMount{{Name: "audit", MountPath: "/audit"}}
		w.Spec.Container.Ports = []corev1.ContainerPort{{ContainerPort: 9000}}
	})
	e := &examplev1.Envoy{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		Spec:       examplev1.EnvoySpec{XDS: &examplev1.XDS{Host: "xds", Port: 18000}},
	}
	if err := suite.Client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}

	before := webhookRequests()
	pod := podIn(ns, map[string]string{
		InjectedAnnotation:             "audit,imaginary",
		EnvoySidecarAnnotation:         "edge",
		EnvoySidecarInjectedAnnotation: "edge",
	})
	if err := suite.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got, inits := containerNames(pod), initNames(pod); got != "app,auditor" || inits != "envoy" {
		t.Errorf("containers = %s, init containers = %s, want app,auditor and envoy", got, inits)
	}
	if got := volumeNames(pod); got != "data,audit,envoy-bootstrap,envoy-tmp" {
		t.Errorf("volumes = %s", got)
	}
	if got := pod.Annotations[InjectedAnnotation]; got != "audit" {
		t.Errorf("%s = %q, want audit: the webhook's record, not the pod's", InjectedAnnotation, got)
	}
	if n := webhookRequests() - before; n != 1 {
		t.Errorf("the injector was called %v times for one pod, want 1", n)
	}

	// A pod that gets no sidecar keeps no record either.
	bare := podIn(ns, map[string]string{InjectedAnnotation: "audit", EnvoySidecarInjectedAnnotation: "edge"})
	bare.Name = "bare"
	bare.Labels = map[string]string{"app": "bare"}
	annotateNamespace(t, ns, SelectorWatchersAnnotation, "")
	if err := suite.Client.Create(ctx, bare); err != nil {
		t.Fatal(err)
	}
	if got := containerNames(bare); got != "app" || Records(bare) {
		t.Errorf("a pod that gets nothing: containers %s, annotations %v", got, bare.Annotations)
	}
}

// The injector checks the namespace's opt-in itself. Through a webhook
// configuration without the namespaceSelector, the API server sends it
// the pods of a namespace that did not opt in: they are left as they are,
// whatever they ask for. Once the namespace is labelled, they are injected.
func TestInjectionNeedsTheNamespacesOptIn(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, false)
	createWatcher(t, ns, "logs", "tail")
	unselected := func() *corev1.Pod {
		p := podIn(ns, map[string]string{InjectAnnotation: "logs", EnvoySidecarAnnotation: "edge"})
		p.Name, p.GenerateName = "", "app-"
		p.Labels = map[string]string{unselectedLabel: "true"}
		return p
	}

	before := webhookRequests()
	pod := unselected()
	if err := suite.Client.Create(ctx, pod); err != nil {
		t.Fatalf("a pod of a namespace that did not opt in: %v", err)
	}
	if n := webhookRequests() - before; n != 1 {
		t.Fatalf("the injector was called %v times, want once: the configuration without the selector did not send the pod", n)
	}
	if got := containerNames(pod); got != "app" || pod.Annotations[InjectedAnnotation] != "" {
		t.Errorf("containers %s, annotations %v: the pod was injected in a namespace that did not opt in", got, pod.Annotations)
	}

	enable(t, ns)
	pod = unselected()
	pod.Annotations = map[string]string{InjectAnnotation: "logs"}
	if err := suite.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := containerNames(pod); got != "app,tail" {
		t.Errorf("containers %s once the namespace opted in, want app,tail", got)
	}
}
