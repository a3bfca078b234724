package main

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// defaultRepository is the image repository of make image and make installer
// when no registry is given.
const defaultRepository = "ghcr.io/kube-envoy-controller/kube-envoy-controller"

// Options are the chart's defaults that config/default does not hold.
type Options struct {
	// Repository and Digest are the default image; an empty Digest leaves
	// the tag (by default the chart's appVersion) to choose it.
	Repository, Digest string
}

// Names of the objects the chart turns values into; Generate fails when one
// is missing, rather than render a chart that ignores a value.
const (
	operatorName  = "kube-envoy-controller"
	containerName = "manager"
	metricsName   = "kube-envoy-controller-metrics"
	metricsFlag   = "--metrics-bind-address="
	goMemLimitEnv = "GOMEMLIMIT"
)

//go:embed values.yaml.tmpl
var valuesTemplate string

// Generate returns the chart's generated files, by path relative to the
// chart, from the objects of config/default in YAML.
func Generate(manifests []byte, o Options) (map[string]string, error) {
	objects, err := decode(manifests)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	var found struct{ namespace, deployment, metrics bool }
	var defaults values
	for _, obj := range objects {
		kind, name := str(obj, "kind"), str(obj, "metadata", "name")
		if kind == "" || name == "" {
			return nil, fmt.Errorf("an object without kind or name: %v", obj)
		}
		var path, content string
		switch {
		case kind == "CustomResourceDefinition":
			b, err := yaml.Marshal(obj)
			if err != nil {
				return nil, err
			}
			// A document separator of its own: helm show crds prints the
			// files one after the other, as one stream.
			path, content = "crds/"+name+".yaml", header+"---\n"+string(b)
		default:
			t := newTemplater()
			wrap := ""
			switch {
			case kind == "Namespace" && name == operatorName:
				found.namespace = true
				wrap = ".Values.createNamespace"
			case kind == "Service" && name == metricsName:
				found.metrics = true
				wrap = ".Values.metrics.port"
			case kind == "Deployment" && name == operatorName:
				found.deployment = true
				if defaults, err = templateDeployment(obj, t); err != nil {
					return nil, fmt.Errorf("Deployment %s: %w", name, err)
				}
			}
			body, err := t.render(obj)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", kind, name, err)
			}
			if wrap != "" {
				body = "{{- if " + wrap + " }}\n" + body + "{{- end }}\n"
			}
			path, content = "templates/"+fileName(kind, name), header+body
		}
		if _, dup := files[path]; dup {
			return nil, fmt.Errorf("two objects would be written to %s", path)
		}
		files[path] = content
	}
	switch {
	case !found.namespace:
		return nil, fmt.Errorf("no Namespace %s", operatorName)
	case !found.deployment:
		return nil, fmt.Errorf("no Deployment %s", operatorName)
	case !found.metrics:
		return nil, fmt.Errorf("no Service %s", metricsName)
	}
	defaults.Repository, defaults.Digest = o.Repository, o.Digest
	if files["values.yaml"], err = renderValues(defaults); err != nil {
		return nil, err
	}
	return files, nil
}

// decode parses a stream of YAML documents into objects, skipping empty ones.
func decode(manifests []byte) ([]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var objects []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return objects, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj) > 0 {
			objects = append(objects, obj)
		}
	}
}

// fileName names an object's template: its kind, and its name without the
// operator's prefix.
func fileName(kind, name string) string {
	short := strings.TrimPrefix(strings.TrimPrefix(name, operatorName), "-")
	if short == "" {
		return strings.ToLower(kind) + ".yaml"
	}
	return strings.ToLower(kind) + "-" + short + ".yaml"
}

// values are the defaults values.yaml holds.
type values struct {
	Repository, Digest string
	Replicas           int64
	Resources          string // YAML, indented as values.yaml's resources
	GoMemLimit         string
	MetricsPort        int64
	Limits             server.Limits
	FilesFlag, EnvFlag string
}

// templateDeployment replaces the values of the operator's Deployment that
// the chart offers by placeholders for their templates, and returns their
// defaults: what the Deployment holds.
func templateDeployment(d map[string]any, t *templater) (values, error) {
	var v values
	spec, _ := d["spec"].(map[string]any)
	replicas, ok := spec["replicas"].(float64)
	if !ok {
		return v, errors.New("no spec.replicas")
	}
	v.Replicas = int64(replicas)
	spec["replicas"] = t.inline("{{ int64 .Values.replicas }}")

	containers, _ := dig(d, "spec", "template", "spec", "containers").([]any)
	var c map[string]any
	for _, x := range containers {
		if m, _ := x.(map[string]any); str(m, "name") == containerName {
			c = m
		}
	}
	if c == nil {
		return v, fmt.Errorf("no container %s", containerName)
	}
	c["image"] = t.inline(`{{ include "kube-envoy-controller.image" . }}`)

	resources, ok := c["resources"].(map[string]any)
	if !ok {
		return v, errors.New("no resources")
	}
	b, err := yaml.Marshal(resources)
	if err != nil {
		return v, err
	}
	v.Resources = strings.TrimSuffix(indent(string(b), "  "), "\n")
	c["resources"] = t.block(func(ind string) string {
		return fmt.Sprintf("%sresources:\n%s  {{- toYaml .Values.resources | nindent %d }}\n", ind, ind, len(ind)+2)
	})

	env, _ := c["env"].([]any)
	for _, x := range env {
		if m, _ := x.(map[string]any); str(m, "name") == goMemLimitEnv {
			v.GoMemLimit = str(m, "value")
			m["value"] = t.inline("{{ .Values.goMemLimit | quote }}")
		}
	}
	if v.GoMemLimit == "" {
		return v, fmt.Errorf("no %s", goMemLimitEnv)
	}

	// The metrics endpoint: its flag, its container port, and the flags
	// config/default leaves at the operator's defaults, added when set.
	args, _ := c["args"].([]any)
	for i, x := range args {
		a, _ := x.(string)
		if !strings.HasPrefix(a, metricsFlag) {
			continue
		}
		port, err := strconv.ParseInt(strings.TrimPrefix(a, metricsFlag+":"), 10, 32)
		if err != nil || !strings.HasPrefix(a, metricsFlag+":") {
			return v, fmt.Errorf("%s: want %s:<port>", a, metricsFlag)
		}
		v.MetricsPort = port
		args[i] = t.inline(metricsFlag + "{{ if .Values.metrics.port }}:{{ int64 .Values.metrics.port }}{{ else }}0{{ end }}")
	}
	if v.MetricsPort == 0 {
		return v, fmt.Errorf("no %s", metricsFlag)
	}
	v.Limits, v.FilesFlag, v.EnvFlag = server.DefaultLimits, translate.FilesFlag, translate.EnvFlag
	c["args"] = append(args, t.block(func(ind string) string {
		var s strings.Builder
		item := func(cond, arg string) {
			fmt.Fprintf(&s, "%s{{- %s }}\n%s- %s\n%s{{- end }}\n", ind, cond, ind, arg, ind)
		}
		item("if not .Values.metrics.secure", "--metrics-secure=false")
		for _, f := range limitFlags {
			conv := "int64 "
			if f.duration {
				conv = ""
			}
			item("with .Values.xds."+f.value, "--"+f.flag+"={{ "+conv+". }}")
		}
		item("with .Values.envoyConfigPolicy.allowedFiles", translate.FilesFlag+`={{ join "," . }}`)
		item("with .Values.envoyConfigPolicy.allowedEnv", translate.EnvFlag+`={{ join "," . }}`)
		return s.String()
	}))

	ports, _ := c["ports"].([]any)
	found := false
	for i, x := range ports {
		m, _ := x.(map[string]any)
		if str(m, "name") != "metrics" {
			continue
		}
		if p, _ := m["containerPort"].(float64); int64(p) != v.MetricsPort {
			return v, fmt.Errorf("the metrics port %v is not the one of %s", m["containerPort"], metricsFlag)
		}
		found = true
		ports[i] = t.block(func(ind string) string {
			return fmt.Sprintf("%s{{- if .Values.metrics.port }}\n%s- containerPort: {{ int64 .Values.metrics.port }}\n%s  name: metrics\n%s{{- end }}\n",
				ind, ind, ind, ind)
		})
	}
	if !found {
		return v, errors.New("no container port metrics")
	}
	return v, nil
}

// limitFlags are the operator's xDS limits: the flag, and the value under
// xds in values.yaml.
var limitFlags = []struct {
	flag, value string
	duration    bool
}{
	{"xds-max-connections", "maxConnections", false},
	{"xds-max-streams-per-connection", "maxStreamsPerConnection", false},
	{"xds-handshake-timeout", "handshakeTimeout", true},
	{"xds-max-connections-per-source", "maxConnectionsPerSource", false},
	{"xds-max-handshakes-per-source", "maxHandshakesPerSource", false},
	{"xds-max-request-bytes", "maxRequestBytes", false},
	{"xds-max-names-per-type", "maxNamesPerType", false},
}

func renderValues(v values) (string, error) {
	t, err := template.New("values").Option("missingkey=error").Parse(valuesTemplate)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header)
	if err := t.Execute(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// templater marshals an object to YAML in which some values are template
// actions: each is a placeholder until the object is marshalled.
type templater struct {
	inlines map[string]string
	blocks  map[string]func(indent string) string
}

func newTemplater() *templater {
	return &templater{inlines: map[string]string{}, blocks: map[string]func(string) string{}}
}

func (t *templater) token() string {
	return fmt.Sprintf("KECCHARTPLACEHOLDER%dX", len(t.inlines)+len(t.blocks))
}

// inline returns a placeholder for a template action within a scalar.
func (t *templater) inline(action string) string {
	p := t.token()
	t.inlines[p] = action
	return p
}

// block returns a placeholder for a map entry's value or a list item that
// lines replace: the function is given the entry's or the item's indentation
// and returns the lines, each ending in a newline (a map entry's key
// included).
func (t *templater) block(lines func(indent string) string) string {
	p := t.token()
	t.blocks[p] = lines
	return p
}

var (
	blockLine = regexp.MustCompile(`^( *)(?:- |[A-Za-z0-9_.-]+: )(KECCHARTPLACEHOLDER\d+X)$`)
	leftover  = regexp.MustCompile(`KECCHARTPLACEHOLDER\d+X`)
)

// render marshals obj and replaces its placeholders. Text that would read as
// a template action is escaped.
func (t *templater) render(obj map[string]any) (string, error) {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	text := strings.ReplaceAll(string(b), "{{", `{{ "{{" }}`)
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if m := blockLine.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil && t.blocks[m[2]] != nil {
			out.WriteString(t.blocks[m[2]](m[1]))
			delete(t.blocks, m[2])
			continue
		}
		for p, action := range t.inlines {
			if strings.Contains(line, p) {
				line = strings.ReplaceAll(line, p, action)
				delete(t.inlines, p)
			}
		}
		out.WriteString(line)
	}
	if len(t.inlines)+len(t.blocks) > 0 || leftover.MatchString(out.String()) {
		var left []string
		for p := range t.inlines {
			left = append(left, t.inlines[p])
		}
		for p := range t.blocks {
			left = append(left, p)
		}
		sort.Strings(left)
		return "", fmt.Errorf("placeholders not replaced: %v", left)
	}
	return out.String(), nil
}

// str returns the string at path in obj, or "".
func str(obj map[string]any, path ...string) string {
	s, _ := dig(obj, path...).(string)
	return s
}

// dig returns the value at path in nested maps, or nil.
func dig(obj map[string]any, path ...string) any {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// indent prefixes every non-empty line of s.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
