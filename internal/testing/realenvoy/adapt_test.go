package realenvoy

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/inject"
)

// builtin is the operator's default: its own xDS server, over mutual TLS.
var builtin = fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName,
	Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000, MutualTLS: true}}

// fleetPod is a pod of e's Deployment, as the Deployment controller would
// make it, with the ConfigMap and the client certificate Secret it mounts.
func fleetPod(t *testing.T, e *examplev1.Envoy, d fleet.Defaults) (*corev1.Pod, map[string]*corev1.ConfigMap, map[string]*corev1.Secret) {
	t.Helper()
	c, err := envoy.Desired(e, d)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name + "-7d9f8-x2x4k"},
		Spec: *c.Deployment.Spec.Template.Spec.DeepCopy()}
	return pod, map[string]*corev1.ConfigMap{c.ConfigMap.Name: c.ConfigMap}, clientSecret(t, e)
}

// clientSecret is e's client certificate Secret, as the operator makes it.
func clientSecret(t *testing.T, e *examplev1.Envoy) map[string]*corev1.Secret {
	t.Helper()
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueClient(a, fleet.Of(e), time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	name := fleet.ClientSecretName(e)
	return map[string]*corev1.Secret{name: {ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": a.Bundle()}}}
}

func gateway() *examplev1.Envoy {
	return &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-gateway"},
		Spec: examplev1.EnvoySpec{Replicas: ptr.To[int32](2), DrainSeconds: ptr.To[int32](30),
			Ports: []examplev1.EnvoyPort{{Name: "http", Port: 80, TargetPort: 8080}}}}
}

var host = Host{Root: "/run/proxies/web-gateway-7d9f8-x2x4k", XDS: "127.0.0.1:40123", AdminPort: 41000, ReadyPort: 41001}

// Adapt changes a proxy only where a host differs from a pod: undo those
// changes, and every file and argument is what the operator rendered.
func TestAdaptChangesNothingElse(t *testing.T) {
	pod, cms, secrets := fleetPod(t, gateway(), builtin)
	p, err := FromPod(pod, cms, secrets)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Adapt(p, host)
	if err != nil {
		t.Fatal(err)
	}

	// What changed.
	if !slices.Contains(a.Args, filepath.Join(host.Root, proxy.BootstrapPath)) {
		t.Errorf("args %q: want the bootstrap under the root", a.Args)
	}
	boot, err := decode(a.Files[filepath.Join(host.Root, proxy.BootstrapPath)])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path []any
		want string
	}{
		{[]any{"admin", "address", "socket_address", "port_value"}, "41000"},
		{[]any{"static_resources", "clusters", 0, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address", "socket_address", "address"}, "127.0.0.1"},
		{[]any{"static_resources", "clusters", 0, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address", "socket_address", "port_value"}, "40123"},
		{[]any{"static_resources", "clusters", 1, "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address", "socket_address", "port_value"}, "41000"},
		{[]any{"static_resources", "listeners", 0, "address", "socket_address", "port_value"}, "41001"},
	} {
		if got := fmt.Sprint(dig(boot, c.path...)); got != c.want {
			t.Errorf("%v: got %s, want %s", c.path, got, c.want)
		}
	}

	// Undone, it is the original.
	if len(a.Files) != len(p.Files) {
		t.Fatalf("%d files, want %d", len(a.Files), len(p.Files))
	}
	for path, data := range p.Files {
		got, ok := a.Files[filepath.Join(host.Root, path)]
		if !ok {
			t.Errorf("%s is missing", path)
			continue
		}
		if !strings.HasSuffix(path, ".yaml") {
			if string(got) != string(data) {
				t.Errorf("%s changed", path)
			}
			continue
		}
		want, err := decode(data)
		if err != nil {
			t.Fatal(err)
		}
		undone, err := decode(got)
		if err != nil {
			t.Fatal(err)
		}
		unroot(undone, host.Root)
		if filepath.Base(path) == proxy.BootstrapKey {
			if err := hostPorts(undone, builtin.XDS.Host, builtin.XDS.Port, Host{AdminPort: proxy.AdminPort, ReadyPort: proxy.ReadyPort}); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(normalize(undone), normalize(want)) {
			t.Errorf("%s: undone, it differs from the original:\n%s\nwant\n%s", path, mustEncode(undone), mustEncode(want))
		}
	}
	var undoneArgs []string
	for _, s := range a.Args {
		undoneArgs = append(undoneArgs, strings.TrimPrefix(s, host.Root))
	}
	if !slices.Equal(undoneArgs, p.Args) {
		t.Errorf("args undone: %q, want %q", undoneArgs, p.Args)
	}
	if !slices.Contains(p.Args, pod.Name) {
		t.Errorf("args %q: want the node id %s, as the kubelet expands $(POD_NAME)", p.Args, pod.Name)
	}
}

func unroot(tree any, root string) {
	switch t := tree.(type) {
	case map[string]any:
		for k, v := range t {
			if s, ok := v.(string); ok {
				t[k] = strings.TrimPrefix(s, root)
			} else {
				unroot(v, root)
			}
		}
	case []any:
		for i, v := range t {
			if s, ok := v.(string); ok {
				t[i] = strings.TrimPrefix(s, root)
			} else {
				unroot(v, root)
			}
		}
	}
}

// normalize makes numbers comparable whatever Go type holds them.
func normalize(tree any) any {
	switch t := tree.(type) {
	case map[string]any:
		for k, v := range t {
			t[k] = normalize(v)
		}
	case []any:
		for i, v := range t {
			t[i] = normalize(v)
		}
	case string, bool, nil:
		return t
	default:
		return fmt.Sprint(t)
	}
	return tree
}

func mustEncode(tree any) string {
	b, _ := encode(tree)
	return string(b)
}

// Every bootstrap the operator renders loads in a real Envoy, run with the
// arguments of the proxy's container: a fleet's, for a matrix of specs, and
// an injected sidecar's.
func TestRenderedBootstrapsLoadInEnvoy(t *testing.T) {
	bin := Require(t)
	plain := fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "xds.example", Port: 18000}}
	withSpec := func(f func(*examplev1.EnvoySpec)) *examplev1.Envoy {
		e := gateway()
		f(&e.Spec)
		return e
	}
	cases := []struct {
		name     string
		e        *examplev1.Envoy
		d        fleet.Defaults
		sidecar  bool
		wantArgs []string
	}{
		{"built-in server over mutual TLS, drain", gateway(), builtin, false, []string{"--drain-time-s", "30"}},
		{"no drain", withSpec(func(s *examplev1.EnvoySpec) { s.DrainSeconds = ptr.To[int32](0) }), builtin, false, nil},
		{"heap limit from the memory limit", withSpec(func(s *examplev1.EnvoySpec) {
			s.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
		}), builtin, false, nil},
		{"debug log level", withSpec(func(s *examplev1.EnvoySpec) { s.LogLevel = "debug" }), builtin, false, []string{"--log-level", "debug"}},
		{"the seed's own xDS server, plain", withSpec(func(s *examplev1.EnvoySpec) {
			s.XDS = &examplev1.XDS{Name: "xds_cluster", Host: "xds-service.default", Port: 19000}
		}), plain, false, nil},
		{"built-in server in plain text", gateway(), plain, false, nil},
		{"injected sidecar", withSpec(func(s *examplev1.EnvoySpec) {
			s.Replicas = ptr.To[int32](0)
			s.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
		}), builtin, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pod *corev1.Pod
			var cms map[string]*corev1.ConfigMap
			var secrets map[string]*corev1.Secret
			if c.sidecar {
				children, err := envoy.Desired(c.e, c.d)
				if err != nil {
					t.Fatal(err)
				}
				app := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop-5c4d7-abcde"},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "shop"}}}}
				if pod, err = inject.Inject(app, inject.Sidecars{Envoy: c.e, Fleet: c.d}); err != nil {
					t.Fatal(err)
				}
				cms = map[string]*corev1.ConfigMap{children.ConfigMap.Name: children.ConfigMap}
				secrets = clientSecret(t, c.e)
			} else {
				pod, cms, secrets = fleetPod(t, c.e, c.d)
			}
			p, err := FromPod(pod, cms, secrets)
			if err != nil {
				t.Fatal(err)
			}
			h := host
			h.Root = t.TempDir()
			a, err := Adapt(p, h)
			if err != nil {
				t.Fatal(err)
			}
			if err := Write(a); err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(c.wantArgs); i += 2 {
				if j := slices.Index(a.Args, c.wantArgs[i]); j < 0 || a.Args[j+1] != c.wantArgs[i+1] {
					t.Errorf("args %q: want %s %s", a.Args, c.wantArgs[i], c.wantArgs[i+1])
				}
			}
			if err := ValidateArgs(bin, h.Root, a.Args...); err != nil {
				t.Errorf("Envoy refuses the bootstrap the operator renders: %v", err)
			}
		})
	}
}
