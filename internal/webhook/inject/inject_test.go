package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

func newWatcher(name, container string, mutate ...func(*watchv1alpha1.Watcher)) *watchv1alpha1.Watcher {
	w := &watchv1alpha1.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       watchv1alpha1.WatcherSpec{Container: corev1.Container{Name: container, Image: "busybox"}},
	}
	for _, m := range mutate {
		m(w)
	}
	return w
}

func withVolume(name string) func(*watchv1alpha1.Watcher) {
	return func(w *watchv1alpha1.Watcher) {
		w.Spec.Volume = corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
}

func withSecret(name string) func(*watchv1alpha1.Watcher) {
	return func(w *watchv1alpha1.Watcher) { w.Spec.ImagePullSecrets = corev1.LocalObjectReference{Name: name} }
}

func newPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

var edgeFleet = &examplev1.Envoy{
	ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "ns"},
	Spec:       examplev1.EnvoySpec{Name: "edge-proxy", Image: "envoyproxy/envoy:test", LogLevel: "debug"},
}

func containerNames(p *corev1.Pod) string {
	var n []string
	for _, c := range p.Spec.Containers {
		n = append(n, c.Name)
	}
	return strings.Join(n, ",")
}

func initNames(p *corev1.Pod) string {
	var n []string
	for _, c := range p.Spec.InitContainers {
		n = append(n, c.Name)
	}
	return strings.Join(n, ",")
}

func nativeSidecar(w *watchv1alpha1.Watcher) { w.Spec.NativeSidecar = true }

func volumeNames(p *corev1.Pod) string {
	var n []string
	for _, v := range p.Spec.Volumes {
		n = append(n, v.Name)
	}
	return strings.Join(n, ",")
}

func TestInject(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		sidecars   Sidecars
		containers string
		inits      string // the init containers
		volumes    string
		secrets    []string
		injected   string
		envoy      string
		conflict   string // part of the Conflict message; "" for none
	}{{
		name:       "nothing",
		pod:        newPod(),
		containers: "app", volumes: "data",
	}, {
		name:       "one Watcher: container, volume, secret",
		pod:        newPod(),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("logs", "tail", withVolume("logs"), withSecret("regcred"))}},
		containers: "app,tail", volumes: "data,logs", secrets: []string{"regcred"}, injected: "logs",
	}, {
		name: "two Watchers in order, a shared identical volume and secret once",
		pod:  newPod(),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{
			newWatcher("b", "b-side", withVolume("shared"), withSecret("regcred")),
			newWatcher("a", "a-side", withVolume("shared"), withSecret("regcred")),
		}},
		containers: "app,b-side,a-side", volumes: "data,shared", secrets: []string{"regcred"}, injected: "b,a",
	}, {
		name: "a pull secret the pod has is not repeated",
		pod: newPod(func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		}),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side", withSecret("regcred"))}},
		containers: "app,side", volumes: "data", secrets: []string{"regcred"}, injected: "w",
	}, {
		name:       "Envoy sidecar, a native sidecar",
		pod:        newPod(),
		sidecars:   Sidecars{Envoy: edgeFleet},
		containers: "app", inits: "envoy", volumes: "data,envoy-bootstrap,envoy-tmp", envoy: "edge",
	}, {
		name:       "Watcher and Envoy",
		pod:        newPod(),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side")}, Envoy: edgeFleet},
		containers: "app,side", inits: "envoy", volumes: "data,envoy-bootstrap,envoy-tmp", injected: "w", envoy: "edge",
	}, {
		name:     "container name taken by the pod",
		pod:      newPod(),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "app")}},
		conflict: `cannot inject Watcher "w": the pod already has a container named "app"`,
	}, {
		name: "container name taken by an init container",
		pod: newPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "side", Image: "x"}}
		}),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side")}},
		conflict: `container named "side"`,
	}, {
		name: "volume name taken by the pod",
		pod:  newPod(),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side", func(w *watchv1alpha1.Watcher) {
			w.Spec.Volume = corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}}
		})}},
		conflict: `cannot inject Watcher "w": the pod already has a different volume named "data"`,
	}, {
		name:       "the pod's own volume, the same as the Watcher's, is shared",
		pod:        newPod(),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side", withVolume("data"))}},
		containers: "app,side", volumes: "data", injected: "w",
	}, {
		name: "two Watchers with different volumes of one name",
		pod:  newPod(),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{
			newWatcher("a", "a-side", withVolume("v")),
			newWatcher("b", "b-side", func(w *watchv1alpha1.Watcher) {
				w.Spec.Volume = corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}}
			}),
		}},
		conflict: `cannot inject Watcher "b": the pod already has a different volume named "v"`,
	}, {
		name: "two Watchers with one container name",
		pod:  newPod(),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{
			newWatcher("a", "side"), newWatcher("b", "side"),
		}},
		conflict: `cannot inject Watcher "b": the pod already has a container named "side"`,
	}, {
		name: "the pod has its own envoy container",
		pod: newPod(func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "envoy", Image: "mine"})
		}),
		sidecars: Sidecars{Envoy: edgeFleet},
		conflict: `cannot inject the sidecar of Envoy "edge": the pod already has a container named "envoy"`,
	}, {
		name: "the pod has its own envoy-bootstrap volume",
		pod: newPod(func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: proxy.BootstrapVolumeName})
		}),
		sidecars: Sidecars{Envoy: edgeFleet},
		conflict: `different volume named "envoy-bootstrap"`,
	}, {
		name: "re-invocation: sidecars the API server has stored are not added again",
		pod: stored(t, newPod(), Sidecars{
			Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side", withVolume("logs"))}, Envoy: edgeFleet}),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side", withVolume("logs"))}, Envoy: edgeFleet},
		containers: "app,side", inits: "envoy", volumes: "data,logs,envoy-bootstrap,envoy-tmp", injected: "w", envoy: "edge",
	}, {
		name:       "re-invocation with a Watcher that is new since",
		pod:        stored(t, newPod(), Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side")}}),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side"), newWatcher("later", "later-side")}},
		containers: "app,side,later-side", volumes: "data", injected: "w,later",
	}, {
		name: "the pod's own records skip nothing",
		pod: newPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{InjectedAnnotation: "w", EnvoySidecarInjectedAnnotation: "edge"}
		}),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side")}, Envoy: edgeFleet},
		containers: "app,side", inits: "envoy", volumes: "data,envoy-bootstrap,envoy-tmp", injected: "w", envoy: "edge",
	}, {
		name: "the pod's own records of sidecars it does not get are removed",
		pod: newPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{InjectedAnnotation: "w,other", EnvoySidecarInjectedAnnotation: "edge", "keep": "me"}
		}),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side")}},
		containers: "app,side", volumes: "data", injected: "w",
	}, {
		name: "a recorded container that is not the Watcher's is a conflict",
		pod: newPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{InjectedAnnotation: "w"}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "busybox", Command: []string{"true"}})
		}),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side")}},
		conflict: `cannot inject Watcher "w": the pod already has a container named "side"`,
	}, {
		name: "a recorded envoy container that is not the fleet's is a conflict",
		pod: newPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{EnvoySidecarInjectedAnnotation: "edge"}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "envoy", Image: "envoyproxy/envoy:test"})
		}),
		sidecars: Sidecars{Envoy: edgeFleet},
		conflict: `cannot inject the sidecar of Envoy "edge": the pod already has a container named "envoy"`,
	}, {
		name: "native sidecars, in order, before the pod's own init containers",
		pod: newPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
		}),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{
			newWatcher("n1", "native-1", nativeSidecar), newWatcher("r", "regular"), newWatcher("n2", "native-2", nativeSidecar),
		}, Envoy: edgeFleet},
		containers: "app,regular", inits: "native-1,native-2,envoy,setup", volumes: "data,envoy-bootstrap,envoy-tmp",
		injected: "n1,r,n2", envoy: "edge",
	}, {
		name: "re-invocation with native sidecars stored",
		pod: stored(t, newPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
		}), Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("n", "native", nativeSidecar)}, Envoy: edgeFleet}),
		sidecars:   Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("n", "native", nativeSidecar)}, Envoy: edgeFleet},
		containers: "app", inits: "native,envoy,setup", volumes: "data,envoy-bootstrap,envoy-tmp", injected: "n", envoy: "edge",
	}, {
		name: "the pod has its own init container named envoy",
		pod: newPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "envoy", Image: "mine"}}
		}),
		sidecars: Sidecars{Envoy: edgeFleet},
		conflict: `cannot inject the sidecar of Envoy "edge": the pod already has a container named "envoy"`,
	}, {
		name:     "a native Watcher named like a container of the pod",
		pod:      newPod(),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "app", nativeSidecar)}},
		conflict: `cannot inject Watcher "w": the pod already has a container named "app"`,
	}, {
		name:     "the Watcher's container, as a regular one, where it asks for a native sidecar",
		pod:      stored(t, newPod(), Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side")}}),
		sidecars: Sidecars{Watchers: []*watchv1alpha1.Watcher{newWatcher("w", "side", nativeSidecar)}},
		conflict: `cannot inject Watcher "w": the pod already has a container named "side"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			got, err := Inject(tt.pod, tt.sidecars)
			if !equality.Semantic.DeepEqual(before, tt.pod) {
				t.Fatal("Inject modified its argument")
			}
			if tt.conflict != "" {
				if _, ok := err.(*Conflict); !ok || !strings.Contains(err.Error(), tt.conflict) {
					t.Fatalf("error = %v, want a Conflict containing %q", err, tt.conflict)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c := containerNames(got); c != tt.containers {
				t.Errorf("containers = %s, want %s", c, tt.containers)
			}
			if c := initNames(got); c != tt.inits {
				t.Errorf("init containers = %s, want %s", c, tt.inits)
			}
			for _, c := range got.Spec.InitContainers {
				if c.Name != "setup" && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
					t.Errorf("injected init container %s has restartPolicy %v, want Always", c.Name, c.RestartPolicy)
				}
			}
			for _, c := range got.Spec.Containers {
				if c.RestartPolicy != nil {
					t.Errorf("container %s has a restartPolicy", c.Name)
				}
			}
			if v := volumeNames(got); v != tt.volumes {
				t.Errorf("volumes = %s, want %s", v, tt.volumes)
			}
			var secrets []string
			for _, s := range got.Spec.ImagePullSecrets {
				secrets = append(secrets, s.Name)
			}
			if strings.Join(secrets, ",") != strings.Join(tt.secrets, ",") {
				t.Errorf("imagePullSecrets = %v, want %v", secrets, tt.secrets)
			}
			if a := got.Annotations[InjectedAnnotation]; a != tt.injected {
				t.Errorf("%s = %q, want %q", InjectedAnnotation, a, tt.injected)
			}
			if a := got.Annotations[EnvoySidecarInjectedAnnotation]; a != tt.envoy {
				t.Errorf("%s = %q, want %q", EnvoySidecarInjectedAnnotation, a, tt.envoy)
			}

			// Whatever was injected, injecting the result again adds nothing,
			// also once the API server has defaulted it.
			again, err := Inject(got, tt.sidecars)
			if err != nil {
				t.Fatalf("second injection: %v", err)
			}
			if !equality.Semantic.DeepEqual(again, got) {
				t.Errorf("second injection changed the pod: containers %s, volumes %s", containerNames(again), volumeNames(again))
			}
			asStored := apiServerStores(got)
			again, err = Inject(asStored, tt.sidecars)
			if err != nil {
				t.Fatalf("second injection of the pod as stored: %v", err)
			}
			if !equality.Semantic.DeepEqual(again, asStored) {
				t.Errorf("second injection changed the pod as stored: containers %s, volumes %s", containerNames(again), volumeNames(again))
			}
		})
	}
}

// stored is pod as the API server stores it after the webhook injected s:
// the webhook may be called again with it.
func stored(t *testing.T, pod *corev1.Pod, s Sidecars) *corev1.Pod {
	t.Helper()
	out, err := Inject(pod, s)
	if err != nil {
		t.Fatal(err)
	}
	return apiServerStores(out)
}

// apiServerStores returns a copy of pod with what the API server adds to a
// pod's containers and volumes after a webhook: defaults, the service
// account token's mount, a LimitRange's resources.
func apiServerStores(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	var all []*corev1.Container
	for i := range out.Spec.InitContainers {
		all = append(all, &out.Spec.InitContainers[i])
	}
	for i := range out.Spec.Containers {
		all = append(all, &out.Spec.Containers[i])
	}
	for _, c := range all {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
		}
		for j := range c.Ports {
			if c.Ports[j].Protocol == "" {
				c.Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
	for i := range out.Spec.Volumes {
		if cm := out.Spec.Volumes[i].ConfigMap; cm != nil && cm.DefaultMode == nil {
			cm.DefaultMode = ptr.To[int32](corev1.ConfigMapVolumeSourceDefaultMode)
		}
	}
	return out
}

func TestCarriesContainer(t *testing.T) {
	want := WatcherContainer(newWatcher("w", "side", func(w *watchv1alpha1.Watcher) {
		w.Spec.Container.Command = []string{"tail", "-F", "/logs/app.log"}
		w.Spec.Container.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}}
		w.Spec.Container.Ports = []corev1.ContainerPort{{ContainerPort: 9000}}
		w.Spec.Container.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")}
	}))
	asStored := apiServerStores(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{want}}}).Spec.Containers[0]
	tests := []struct {
		name   string
		change func(c *corev1.Container)
		want   bool
	}{
		{"as added", func(*corev1.Container) {}, true},
		{"as stored: defaults, the token's mount, a LimitRange's limits", func(c *corev1.Container) { *c = asStored }, true},
		{"another image", func(c *corev1.Container) { c.Image = "mine" }, false},
		{"another command", func(c *corev1.Container) { c.Command = []string{"true"} }, false},
		{"an argument more", func(c *corev1.Container) { c.Args = []string{"--quiet"} }, false},
		{"a variable more", func(c *corev1.Container) { c.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "none"}} }, false},
		{"another environment source", func(c *corev1.Container) { c.EnvFrom[0].ConfigMapRef.Name = "mine" }, false},
		{"a working directory", func(c *corev1.Container) { c.WorkingDir = "/tmp" }, false},
		{"its mount gone", func(c *corev1.Container) { c.VolumeMounts = asStored.VolumeMounts[1:] }, false},
		{"its mount elsewhere", func(c *corev1.Container) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/elsewhere"}}
		}, false},
		{"a port less", func(c *corev1.Container) { c.Ports = nil }, false},
		{"another request", func(c *corev1.Container) {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := *want.DeepCopy()
			tt.change(&have)
			if got := CarriesContainer(have, want); got != tt.want {
				t.Errorf("CarriesContainer = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCarriesVolume(t *testing.T) {
	want := EnvoyVolumes(edgeFleet, fleet.Defaults{})[0] // a ConfigMap volume, whose defaultMode the API server sets
	asStored := apiServerStores(&corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{want}}}).Spec.Volumes[0]
	if !CarriesVolume(asStored, want) {
		t.Errorf("the volume as stored, %+v, does not carry %+v", asStored, want)
	}
	other := *asStored.DeepCopy()
	other.ConfigMap.Name = "mine"
	if CarriesVolume(other, want) {
		t.Error("a volume of another ConfigMap carries the fleet's")
	}
	empty := corev1.Volume{Name: want.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	if CarriesVolume(empty, want) {
		t.Error("an emptyDir carries a ConfigMap volume")
	}
}

func TestWatcherContainerTakesEnvFromConfigMap(t *testing.T) {
	w := newWatcher("logs", "tail", func(w *watchv1alpha1.Watcher) {
		w.Spec.Container.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}
	})
	got, err := Inject(newPod(), Sidecars{Watchers: []*watchv1alpha1.Watcher{w}})
	if err != nil {
		t.Fatal(err)
	}
	c := got.Spec.Containers[1]
	if len(c.EnvFrom) != 2 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[1].ConfigMapRef == nil || c.EnvFrom[1].ConfigMapRef.Name != "logs-config" {
		t.Errorf("envFrom = %+v, want the container's own, then ConfigMap logs-config", c.EnvFrom)
	}
	if len(w.Spec.Container.EnvFrom) != 1 {
		t.Error("the Watcher's container was modified")
	}
}

func TestEnvoySidecarJoinsTheFleet(t *testing.T) {
	got, err := Inject(newPod(), Sidecars{Envoy: edgeFleet})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Containers) != 1 || len(got.Spec.InitContainers) != 1 {
		t.Fatalf("containers %s, init containers %s: want the sidecar among the init containers", containerNames(got), initNames(got))
	}
	c := got.Spec.InitContainers[0]
	// A native sidecar, whose startup probe holds the application back
	// until the proxy is ready.
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("restartPolicy = %v, want Always", c.RestartPolicy)
	}
	if p := c.StartupProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" || p.HTTPGet.Port.IntVal != proxy.ReadyPort ||
		p.PeriodSeconds != 1 || p.FailureThreshold*p.PeriodSeconds < 60 {
		t.Errorf("startup probe = %+v, want /ready on %d, every second, for a minute at least", p, proxy.ReadyPort)
	}
	if c.Lifecycle != nil {
		t.Errorf("the sidecar has a lifecycle %+v: it stops after the application, with nothing to drain", c.Lifecycle)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{
		"-c " + proxy.BootstrapPath,
		"--service-node $(POD_NAME)",
		"--service-cluster " + fleet.ID{Namespace: "ns", Name: "edge"}.String(),
		"--log-level debug",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if c.Image != "envoyproxy/envoy:test" {
		t.Errorf("image = %s", c.Image)
	}
	var bootstrap *corev1.Volume
	for i := range got.Spec.Volumes {
		if got.Spec.Volumes[i].Name == proxy.BootstrapVolumeName {
			bootstrap = &got.Spec.Volumes[i]
		}
	}
	// The fleet's ConfigMap: <spec.name>-bootstrap.
	if bootstrap == nil || bootstrap.ConfigMap == nil || bootstrap.ConfigMap.Name != "edge-proxy-bootstrap" {
		t.Fatalf("bootstrap volume = %+v, want ConfigMap edge-proxy-bootstrap", bootstrap)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == proxy.BootstrapVolumeName && m.MountPath == proxy.BootstrapDir)
	}
	if !mounted {
		t.Errorf("the bootstrap is not mounted at %s: %+v", proxy.BootstrapDir, c.VolumeMounts)
	}

	// Defaults: the API's image and log level, the ConfigMap of metadata.name.
	plain := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"}}
	c = EnvoyContainer(plain, fleet.Defaults{})
	if c.Image != fleet.DefaultImage || !strings.Contains(strings.Join(c.Args, " "), "--log-level info") {
		t.Errorf("defaults: image %s, args %v", c.Image, c.Args)
	}
	if v := EnvoyVolumes(plain, fleet.Defaults{}); v[0].ConfigMap.Name != "plain-bootstrap" || len(v) != 2 {
		t.Errorf("bootstrap ConfigMap = %s, want plain-bootstrap, and no other volume but /tmp: %+v", v[0].ConfigMap.Name, v)
	}
}

// Over mutual TLS, an Envoy sidecar mounts its fleet's client certificate
// Secret, as the fleet's own pods do, and reads the SDS files that name it.
func TestEnvoySidecarMountsTheFleetsCertificate(t *testing.T) {
	mtls := fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "xds.svc", Port: 18000, MutualTLS: true}}
	got, err := Inject(newPod(), Sidecars{Envoy: edgeFleet, Fleet: mtls})
	if err != nil {
		t.Fatal(err)
	}
	var secret, bootstrap *corev1.Volume
	for i, v := range got.Spec.Volumes {
		switch v.Name {
		case proxy.ClientCertVolumeName:
			secret = &got.Spec.Volumes[i]
		case proxy.BootstrapVolumeName:
			bootstrap = &got.Spec.Volumes[i]
		}
	}
	if secret == nil || secret.Secret == nil || secret.Secret.SecretName != fleet.ClientSecretName(edgeFleet) {
		t.Fatalf("client certificate volume = %+v, want Secret %s", secret, fleet.ClientSecretName(edgeFleet))
	}
	if len(bootstrap.ConfigMap.Items) != 3 {
		t.Errorf("the bootstrap volume has items %+v, want the bootstrap and two SDS files", bootstrap.ConfigMap.Items)
	}
	mounted := false
	for _, m := range got.Spec.InitContainers[0].VolumeMounts {
		mounted = mounted || (m.Name == proxy.ClientCertVolumeName && m.MountPath == proxy.ClientCertDir && m.ReadOnly)
	}
	if !mounted {
		t.Errorf("the sidecar does not mount its certificate read-only at %s: %+v", proxy.ClientCertDir, got.Spec.InitContainers[0].VolumeMounts)
	}
	if containers := got.Spec.Containers; len(containers) != 1 {
		t.Errorf("%d containers", len(containers))
	}
}

func TestSelect(t *testing.T) {
	watchers := []watchv1alpha1.Watcher{
		*newWatcher("named", "a"),
		*newWatcher("z-web", "b", func(w *watchv1alpha1.Watcher) {
			w.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		}),
		*newWatcher("a-web", "c", func(w *watchv1alpha1.Watcher) {
			w.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}
		}),
		*newWatcher("db", "d", func(w *watchv1alpha1.Watcher) {
			w.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		}),
		*newWatcher("broken", "e", func(w *watchv1alpha1.Watcher) {
			w.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
		}),
		*newWatcher("everyone", "f", func(w *watchv1alpha1.Watcher) { w.Spec.Selector = &metav1.LabelSelector{} }),
	}
	tests := []struct {
		annotation string
		labels     map[string]string
		named      string
		matched    string
		missing    string
	}{
		{"", nil, "", "everyone", ""},
		{"named", map[string]string{"app": "other"}, "named", "everyone", ""},
		{" z-web , named,z-web", map[string]string{"app": "web"}, "z-web,named", "a-web,everyone", ""},
		{"", map[string]string{"app": "web"}, "", "a-web,everyone,z-web", ""},
		{"nope,named,gone", nil, "named", "everyone", "nope,gone"},
	}
	for _, tt := range tests {
		pod := newPod(func(p *corev1.Pod) {
			p.Labels = tt.labels
			p.Annotations = map[string]string{InjectAnnotation: tt.annotation}
		})
		named, matched, missing := Select(pod, watchers)
		if n, m := names(named), names(matched); n != tt.named || m != tt.matched || strings.Join(missing, ",") != tt.missing {
			t.Errorf("Select(%q, %v) = named %s, matched %s, missing %v; want %s, %s, %s",
				tt.annotation, tt.labels, n, m, missing, tt.named, tt.matched, tt.missing)
		}
	}
}

func TestPermitted(t *testing.T) {
	matched := []*watchv1alpha1.Watcher{newWatcher("audit", "a"), newWatcher("logs", "b"), newWatcher("metrics", "c")}
	tests := []struct {
		annotations map[string]string
		want        string
	}{
		{nil, ""},
		{map[string]string{SelectorWatchersAnnotation: ""}, ""},
		{map[string]string{SelectorWatchersAnnotation: "logs"}, "logs"},
		{map[string]string{SelectorWatchersAnnotation: " metrics, audit ,gone"}, "audit,metrics"},
		{map[string]string{SelectorWatchersAnnotation: "*"}, "audit,logs,metrics"},
		{map[string]string{"other": "*"}, ""},
	}
	for _, tt := range tests {
		if got := names(Permitted(matched, tt.annotations)); got != tt.want {
			t.Errorf("Permitted(%v) = %s, want %s", tt.annotations, got, tt.want)
		}
	}
}

func names(ws []*watchv1alpha1.Watcher) string {
	var n []string
	for _, w := range ws {
		n = append(n, w.Name)
	}
	return strings.Join(n, ",")
}
