package inject

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// Labels and annotations the webhook reads and writes.
const (
	// NamespaceLabel, set to NamespaceEnabled on a namespace, puts its pods in
	// the webhook's scope.
	NamespaceLabel   = "kube-envoy-controller.io/injection"
	NamespaceEnabled = "enabled"

	// InjectAnnotation on a pod lists the Watchers it asks for, comma-separated.
	InjectAnnotation = "watch.my.domain/inject"
	// SelectorWatchersAnnotation on a namespace lists the Watchers whose
	// spec.selector injects the namespace's pods, comma-separated, or is "*"
	// for every Watcher of the namespace. A Watcher it does not list is
	// injected only into the pods that name it.
	SelectorWatchersAnnotation = "watch.my.domain/selector-watchers"
	// InjectedAnnotation records the Watchers whose sidecars the pod got. The
	// webhook writes it; a value the pod brings is replaced.
	InjectedAnnotation = "watch.my.domain/injected"
	// EnvoySidecarAnnotation on a pod names the Envoy fleet whose sidecar it asks for.
	EnvoySidecarAnnotation = "example.com/envoy-sidecar"
	// EnvoySidecarInjectedAnnotation records the Envoy fleet whose sidecar the
	// pod got. The webhook writes it; a value the pod brings is replaced.
	EnvoySidecarInjectedAnnotation = "example.com/envoy-sidecar-injected"
)

// Sidecars are what one pod gets.
type Sidecars struct {
	// Watchers whose sidecars the pod gets, in this order.
	Watchers []*watchv1alpha1.Watcher
	// Envoy is the fleet whose sidecar the pod gets, or nil.
	Envoy *examplev1.Envoy
	// Fleet is the operator's fleet defaults: how the sidecar reaches the
	// built-in xDS server.
	Fleet fleet.Defaults
}

// Empty reports whether there is nothing to inject.
func (s Sidecars) Empty() bool { return len(s.Watchers) == 0 && s.Envoy == nil }

// SplitList parses a comma-separated annotation value: names in order,
// trimmed, without empties and repeats.
func SplitList(value string) []string {
	var out []string
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item != "" && !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out
}

// Select sorts the Watchers of the pod's namespace by how they would reach
// the pod. named are those its InjectAnnotation names, in that order; matched
// are the others whose spec.selector matches its labels, by name. missing are
// the names the annotation lists that are not among watchers. A Watcher
// without a selector is injected by the annotation only; one whose selector
// does not parse matches no pod. Whether a matched Watcher may inject is the
// namespace's decision (Permitted).
func Select(pod *corev1.Pod, watchers []watchv1alpha1.Watcher) (named, matched []*watchv1alpha1.Watcher, missing []string) {
	byName := make(map[string]*watchv1alpha1.Watcher, len(watchers))
	for i := range watchers {
		byName[watchers[i].Name] = &watchers[i]
	}
	taken := map[string]bool{}
	for _, name := range SplitList(pod.Annotations[InjectAnnotation]) {
		w, ok := byName[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		named = append(named, w)
		taken[name] = true
	}
	for name, w := range byName {
		if taken[name] || w.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(w.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		matched = append(matched, w)
	}
	slices.SortFunc(matched, func(a, b *watchv1alpha1.Watcher) int { return cmp.Compare(a.Name, b.Name) })
	return named, matched, missing
}

// Permitted returns the Watchers of matched that the namespace, by its
// annotations, lets inject by selector (SelectorWatchersAnnotation). A pod
// consents to the Watchers it names; a Watcher that selects pods adds its
// container to pods that other people wrote, so whoever governs the
// namespace decides which Watchers may.
func Permitted(matched []*watchv1alpha1.Watcher, namespaceAnnotations map[string]string) []*watchv1alpha1.Watcher {
	allowed := SplitList(namespaceAnnotations[SelectorWatchersAnnotation])
	var out []*watchv1alpha1.Watcher
	for _, w := range matched {
		if slices.Contains(allowed, "*") || slices.Contains(allowed, w.Name) {
			out = append(out, w)
		}
	}
	return out
}

// Conflict is why a pod cannot get its sidecars: it already has a container
// or volume of the same name as one that would be added.
type Conflict struct{ Message string }

func (c *Conflict) Error() string { return c.Message }

// WatcherContainer is the container a Watcher adds: its spec.container, with
// its environment also taken from the Watcher's ConfigMap, and, for a
// Watcher that asks for a native sidecar, restartPolicy Always.
func WatcherContainer(w *watchv1alpha1.Watcher) corev1.Container {
	c := *w.Spec.Container.DeepCopy()
	c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{
		ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.ConfigMapName()}},
	})
	if w.Spec.NativeSidecar {
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	}
	return c
}

// EnvoyContainer is the sidecar that makes the pod a member of fleet e: the
// same container as the fleet's own pods, reading the fleet's bootstrap, with
// the pod's name as node id and the fleet's identity as cluster, so that the
// xDS server sends it the fleet's configuration. It declares no listener
// ports: they would collide with the application's.
//
// It is a native sidecar: an init container with restartPolicy Always, whose
// startup probe holds the pod's containers back until the proxy is ready, and
// which the kubelet stops after them. So the application's first and last
// requests find the proxy there. It needs no drain hook: by the time it
// stops, the application it serves has stopped.
func EnvoyContainer(e *examplev1.Envoy, d fleet.Defaults) corev1.Container {
	c := proxy.Container(fleet.ContainerOptions(e, d))
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	c.StartupProbe = proxy.StartupProbe()
	return c
}

// native reports whether c is a native sidecar: an init container that
// keeps running beside the pod's containers.
func native(c corev1.Container) bool {
	return ptr.Deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways
}

// EnvoyVolumes are the volumes EnvoyContainer mounts: the fleet's bootstrap
// ConfigMap, a scratch /tmp and, over mutual TLS, the fleet's client
// certificate Secret, the same as the fleet's own pods.
func EnvoyVolumes(e *examplev1.Envoy, d fleet.Defaults) []corev1.Volume {
	return fleet.Volumes(e, d)
}

// Inject returns a copy of pod with the sidecars added: for each Watcher its
// container, volume and image pull secret, then the Envoy sidecar and its
// volumes, and the annotations that record them. Native sidecars (the Envoy
// sidecar, and Watchers with spec.nativeSidecar) go to the pod's init
// containers, in that order and before the pod's own, so that they run
// before and beside everything else; the others are added to its
// containers. It decides from the pod's
// containers, never from its annotations: a sidecar is taken as there only
// when the pod has its container as the sidecar defines it (Carries), so a
// second call with the result adds nothing, and a pod cannot skip a sidecar
// by bringing the annotation that records it. The recording annotations are
// written from s alone, whatever the pod brought. It never replaces a
// container or volume the pod has: such a clash is a *Conflict. pod is not
// modified.
func Inject(pod *corev1.Pod, s Sidecars) (*corev1.Pod, error) {
	out := pod.DeepCopy()
	p := &injection{pod: out, added: map[string]bool{}}
	var injected []string

	for _, w := range s.Watchers {
		what := fmt.Sprintf("Watcher %q", w.Name)
		if err := p.addContainer(WatcherContainer(w), what); err != nil {
			return nil, err
		}
		if w.Spec.Volume.Name != "" {
			if err := p.addVolume(w.Spec.Volume, what); err != nil {
				return nil, err
			}
		}
		if ref := w.Spec.ImagePullSecrets; ref.Name != "" && !slices.Contains(out.Spec.ImagePullSecrets, ref) {
			out.Spec.ImagePullSecrets = append(out.Spec.ImagePullSecrets, ref)
		}
		injected = append(injected, w.Name)
	}
	record(out, InjectedAnnotation, strings.Join(injected, ","))

	envoy := ""
	if e := s.Envoy; e != nil {
		what := fmt.Sprintf("the sidecar of Envoy %q", e.Name)
		if err := p.addContainer(EnvoyContainer(e, s.Fleet), what); err != nil {
			return nil, err
		}
		for _, v := range EnvoyVolumes(e, s.Fleet) {
			if err := p.addVolume(v, what); err != nil {
				return nil, err
			}
		}
		envoy = e.Name
	}
	record(out, EnvoySidecarInjectedAnnotation, envoy)
	return out, nil
}

// Records reports whether pod carries one of the annotations that only the
// webhook writes: then it must be answered with them rewritten, even when
// it gets no sidecar.
func Records(pod *corev1.Pod) bool {
	_, w := pod.Annotations[InjectedAnnotation]
	_, e := pod.Annotations[EnvoySidecarInjectedAnnotation]
	return w || e
}

// injection is one Inject call's work on its pod.
type injection struct {
	pod *corev1.Pod
	// added are the volumes this call added, by name.
	added map[string]bool
	// natives is how many native sidecars this call added.
	natives int
}

// addContainer adds c unless the pod carries it already (an earlier call
// added it), to the init containers when it is a native sidecar, after the
// native sidecars this call added; a container of that name that is not c
// is a Conflict.
func (p *injection) addContainer(c corev1.Container, what string) error {
	spec := &p.pod.Spec
	taken := &Conflict{Message: fmt.Sprintf(
		"cannot inject %s: the pod already has a container named %q; rename one of them", what, c.Name)}
	home, other := &spec.Containers, spec.InitContainers
	if native(c) {
		home, other = &spec.InitContainers, spec.Containers
	}
	for _, have := range other {
		if have.Name == c.Name {
			return taken
		}
	}
	for _, have := range *home {
		if have.Name != c.Name {
			continue
		}
		if CarriesContainer(have, c) {
			return nil
		}
		return taken
	}
	for _, have := range spec.EphemeralContainers {
		if have.Name == c.Name {
			return &Conflict{Message: fmt.Sprintf(
				"cannot inject %s: the pod already has an ephemeral container named %q", what, c.Name)}
		}
	}
	if native(c) {
		spec.InitContainers = slices.Insert(spec.InitContainers, p.natives, c)
		p.natives++
		return nil
	}
	spec.Containers = append(spec.Containers, c)
	return nil
}

// addVolume adds v unless the pod has it already: added by an earlier
// sidecar of the same call, identically, or by an earlier call. A different
// volume of that name is a Conflict.
func (p *injection) addVolume(v corev1.Volume, what string) error {
	for _, have := range p.pod.Spec.Volumes {
		if have.Name != v.Name {
			continue
		}
		if p.added[v.Name] && equality.Semantic.DeepEqual(have, v) || CarriesVolume(have, v) {
			return nil
		}
		return &Conflict{Message: fmt.Sprintf(
			"cannot inject %s: the pod already has a different volume named %q; rename one of them", what, v.Name)}
	}
	p.pod.Spec.Volumes = append(p.pod.Spec.Volumes, *v.DeepCopy())
	p.added[v.Name] = true
	return nil
}

// record sets the annotation key to value, or removes it when value is empty.
func record(pod *corev1.Pod, key, value string) {
	if value == "" {
		delete(pod.Annotations, key)
		return
	}
	setAnnotation(pod, key, value)
}

func setAnnotation(pod *corev1.Pod, key, value string) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[key] = value
}
