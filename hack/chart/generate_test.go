package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/manifests"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// tool runs one of the binaries make tools puts in bin/ and returns its
// standard output.
func tool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	path := filepath.Join(root, "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("bin/%s is missing: run `make tools` first", name)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func parse(t *testing.T, b []byte) manifests.Objects {
	t.Helper()
	objs, err := manifests.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// render is helm template of the committed chart, CRDs included, with values set.
func render(t *testing.T, set ...string) manifests.Objects {
	t.Helper()
	args := []string{"template", "kube-envoy-controller", filepath.Join(root, "charts", "kube-envoy-controller"), "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return parse(t, tool(t, "helm", args...))
}

// TestChartRendersConfigDefault: with its default values, but for the image,
// the committed chart renders the objects of config/default. (Those of
// install.yaml, image included, are the install test's.)
func TestChartRendersConfigDefault(t *testing.T) {
	want := parse(t, tool(t, "kubectl", "kustomize", filepath.Join(root, "config", "default")))
	// config/default names the image kube-envoy-controller:latest.
	got := render(t, "image.repository=kube-envoy-controller", "image.tag=latest")
	if d := manifests.Diff(want, got); len(d) > 0 {
		t.Errorf("the chart renders other objects than config/default: run make generate\n%s", strings.Join(d, "\n"))
	}
}

// TestShowCRDs: helm show crds prints the chart's CRDs as a stream that
// kubectl apply takes, each its own document, as the chart's notes say to
// apply them before an upgrade.
func TestShowCRDs(t *testing.T) {
	got := parse(t, tool(t, "helm", "show", "crds", filepath.Join(root, "charts", "kube-envoy-controller")))
	want := 0
	for k := range parse(t, tool(t, "kubectl", "kustomize", filepath.Join(root, "config", "default"))) {
		if k.Kind == "CustomResourceDefinition" {
			want++
			if got[k] == nil {
				t.Errorf("helm show crds does not print %s", k)
			}
		}
	}
	if len(got) != want || want == 0 {
		t.Errorf("helm show crds prints %d objects, want the %d CRDs", len(got), want)
	}
}

// operator returns the operator's Deployment among objs, and its container.
func operator(t *testing.T, objs manifests.Objects) (deployment, container map[string]any) {
	t.Helper()
	d := objs[manifests.Key{APIVersion: "apps/v1", Kind: "Deployment", Namespace: operatorName, Name: operatorName}]
	if d == nil {
		t.Fatal("no Deployment")
	}
	for _, c := range dig(d, "spec", "template", "spec", "containers").([]any) {
		if str(c.(map[string]any), "name") == containerName {
			return d, c.(map[string]any)
		}
	}
	t.Fatal("no container manager")
	return nil, nil
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func TestValues(t *testing.T) {
	defaults := render(t)
	_, c := operator(t, defaults)
	if got, want := c["image"], "ghcr.io/kube-envoy-controller/kube-envoy-controller:latest"; got != want {
		t.Errorf("default image %v, want %s (the chart's appVersion)", got, want)
	}

	objs := render(t,
		"image.repository=registry.example/kec", "image.tag=v1", "image.digest=sha256:0123",
		"replicas=3", "resources.limits.memory=3Gi", "resources.requests.cpu=1", "goMemLimit=2700MiB",
		"metrics.port=9443", "metrics.secure=false",
		"xds.maxConnections=20000", "xds.maxStreamsPerConnection=4", "xds.handshakeTimeout=2s",
		"xds.maxConnectionsPerSource=50", "xds.maxHandshakesPerSource=10", "xds.maxRequestBytes=8388608",
		"xds.maxNamesPerType=500",
		"envoyConfigPolicy.allowedFiles={/etc/pages/,/etc/ca.pem}", "envoyConfigPolicy.allowedEnv={GREETING}",
		"metrics.readers[0].name=prometheus", "metrics.readers[0].namespace=monitoring",
		"createNamespace=false",
	)
	d, c := operator(t, objs)
	if got, want := c["image"], "registry.example/kec@sha256:0123"; got != want {
		t.Errorf("image %v, want %s: the digest wins over the tag", got, want)
	}
	if got := dig(d, "spec", "replicas"); got != float64(3) {
		t.Errorf("replicas %v, want 3", got)
	}
	if got := fmt.Sprint(c["resources"]); got != "map[limits:map[memory:3Gi] requests:map[cpu:1 memory:128Mi]]" {
		t.Errorf("resources %s", got)
	}
	if env := fmt.Sprint(c["env"]); !strings.Contains(env, "map[name:GOMEMLIMIT value:2700MiB]") {
		t.Errorf("env %s, want GOMEMLIMIT=2700MiB", env)
	}
	args := strs(c["args"])
	for _, want := range []string{
		"--metrics-bind-address=:9443", "--metrics-secure=false",
		"--xds-max-connections=20000", "--xds-max-streams-per-connection=4", "--xds-handshake-timeout=2s",
		"--xds-max-connections-per-source=50", "--xds-max-handshakes-per-source=10",
		"--xds-max-request-bytes=8388608", // not 8.388608e+06
		"--xds-max-names-per-type=500",
		"--envoyconfig-allowed-files=/etc/pages/,/etc/ca.pem", "--envoyconfig-allowed-env=GREETING",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q, want %s", args, want)
		}
	}
	if ports := fmt.Sprint(c["ports"]); !strings.Contains(ports, "map[containerPort:9443 name:metrics]") {
		t.Errorf("ports %s, want metrics on 9443", ports)
	}
	binding := objs[manifests.Key{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: "kube-envoy-controller-metrics-reader"}]
	if got := fmt.Sprint(binding["subjects"]); got != "[map[kind:ServiceAccount name:prometheus namespace:monitoring]]" {
		t.Errorf("the metrics readers' binding's subjects: %s", got)
	}
	if _, ok := objs[manifests.Key{APIVersion: "v1", Kind: "Namespace", Name: operatorName}]; ok {
		t.Error("createNamespace=false, and the Namespace is rendered")
	}

	// Without metrics: the flag says 0, and neither the port nor the Service is there.
	objs = render(t, "metrics.port=0")
	_, c = operator(t, objs)
	if args := strs(c["args"]); !slices.Contains(args, "--metrics-bind-address=0") {
		t.Errorf("args %q, want --metrics-bind-address=0", args)
	}
	if ports := fmt.Sprint(c["ports"]); strings.Contains(ports, "metrics") {
		t.Errorf("ports %s, want none for metrics", ports)
	}
	if _, ok := objs[manifests.Key{APIVersion: "v1", Kind: "Service", Namespace: operatorName, Name: metricsName}]; ok {
		t.Error("metrics.port=0, and the metrics Service is rendered")
	}
	if len(objs) != len(defaults)-1 {
		t.Errorf("metrics.port=0 renders %d objects, want %d: the defaults' but the Service", len(objs), len(defaults)-1)
	}
}

// TestGenerateRefuses: objects the chart cannot offer its values on are
// an error, not a chart that would ignore them.
func TestGenerateRefuses(t *testing.T) {
	all := string(tool(t, "kubectl", "kustomize", filepath.Join(root, "config", "default")))
	for _, c := range []struct{ name, old, new, want string }{
		{"no Deployment", "kind: Deployment", "kind: StatefulSet", "no Deployment kube-envoy-controller"},
		{"no metrics flag", "- --metrics-bind-address=:8443\n", "", "no --metrics-bind-address="},
		{"metrics on another port", "containerPort: 8443", "containerPort: 8444", "the metrics port 8444"},
		{"no GOMEMLIMIT", "name: GOMEMLIMIT", "name: GOGC", "no GOMEMLIMIT"},
		{"no metrics Service", "name: kube-envoy-controller-metrics\n", "name: kube-envoy-controller-scrape\n", "no Service kube-envoy-controller-metrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			edited := strings.Replace(all, c.old, c.new, 1)
			if edited == all {
				t.Fatalf("the test's edit %q does not apply", c.old)
			}
			if _, err := Generate([]byte(edited), Options{Repository: defaultRepository}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Generate = %v, want an error: %s", err, c.want)
			}
		})
	}
}

// TestTemplateActionsAreEscaped: text in an object that reads as a template
// action (a CEL or Go template in a string, say) is rendered as it is.
func TestTemplateActionsAreEscaped(t *testing.T) {
	in := `apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-envoy-controller-x
data:
  text: "{{ .Values.replicas }}"
`
	tp := newTemplater()
	obj, err := decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := tp.render(obj[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `text: '{{ "{{" }} .Values.replicas }}'`; !strings.Contains(out, want) {
		t.Errorf("rendered:\n%s\nwant %s", out, want)
	}
}
