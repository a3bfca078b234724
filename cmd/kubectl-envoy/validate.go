package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// manifest is one YAML or JSON document of a file.
type manifest struct {
	file string
	// doc is the document's position in its file, from 1.
	doc  int
	data []byte
}

func (m manifest) where() string {
	return fmt.Sprintf("%s (document %d)", m.file, m.doc)
}

// readManifests reads the documents of the files, and of the .yaml, .yml and
// .json files of the directories, given (recursively if asked), in order;
// "-" reads stdin.
func readManifests(paths []string, recursive bool, stdin io.Reader) ([]manifest, error) {
	var out []manifest
	for _, p := range paths {
		if p == "-" {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return nil, err
			}
			docs, err := splitDocuments("<stdin>", b)
			if err != nil {
				return nil, err
			}
			out = append(out, docs...)
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		var files []string
		if !info.IsDir() {
			files = []string{p}
		} else {
			err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if path != p && !recursive {
						return filepath.SkipDir
					}
					return nil
				}
				switch strings.ToLower(filepath.Ext(path)) {
				case ".yaml", ".yml", ".json":
					files = append(files, path)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			sort.Strings(files)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			docs, err := splitDocuments(f, b)
			if err != nil {
				return nil, err
			}
			out = append(out, docs...)
		}
	}
	return out, nil
}

// splitDocuments splits a file's content into its YAML documents.
func splitDocuments(file string, b []byte) ([]manifest, error) {
	var out []manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for doc := 1; ; doc++ {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, manifest{file: file, doc: doc, data: d})
	}
}

// validation is what validate found.
type validation struct {
	configs, fleets, skipped int
	// problems name the file, the EnvoyConfig, the resource and the field.
	problems []string
	// byFleet are the EnvoyConfigs of each fleet, in the order of the files.
	byFleet []fleetFiles
	// loaded says, of each fleet, what a real Envoy said of it (--envoy).
	loaded []string
}

// fleetFiles are one fleet's EnvoyConfigs of the files.
type fleetFiles struct {
	id      fleet.ID
	configs []translate.Config
}

// fileConfig is an EnvoyConfig of the files, and where it is.
type fileConfig struct {
	where  string
	config translate.Config
}

// decoded is what decodeConfigs found.
type decoded struct {
	configs []fileConfig
	skipped int
	// problems name the file and the EnvoyConfig.
	problems []string
}

// decodeConfigs returns the EnvoyConfigs among docs, in order, each decoded
// strictly (an unknown field is an error, as with kubectl's strict field
// validation). An EnvoyConfig without a namespace is in namespace. Other
// kinds are skipped; an EnvoyConfig given twice is a problem.
func decodeConfigs(docs []manifest, namespace string) decoded {
	var d decoded
	seen := map[string]string{}
	for _, m := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(m.data, &tm); err != nil {
			d.problems = append(d.problems, fmt.Sprintf("%s: %v", m.where(), err))
			continue
		}
		if tm.Kind == "" && tm.APIVersion == "" {
			if len(bytes.TrimSpace(m.data)) > 0 && !isOnlyComments(m.data) {
				d.skipped++
			}
			continue
		}
		if tm.Kind != "EnvoyConfig" || tm.APIVersion != examplev1.GroupVersion.String() {
			d.skipped++
			continue
		}
		cfg := &examplev1.EnvoyConfig{}
		if err := yaml.UnmarshalStrict(m.data, cfg); err != nil {
			d.problems = append(d.problems, fmt.Sprintf("%s: EnvoyConfig %s: %v", m.where(), nameOf(m.data), err))
			continue
		}
		if cfg.Namespace == "" {
			cfg.Namespace = namespace
		}
		if cfg.Name == "" {
			d.problems = append(d.problems, fmt.Sprintf("%s: EnvoyConfig: metadata.name is required", m.where()))
			continue
		}
		c := translate.FromObject(cfg)
		if first, dup := seen[c.Name]; dup {
			d.problems = append(d.problems, fmt.Sprintf("%s: EnvoyConfig %s: defined again (first in %s)", m.where(), c.Name, first))
			continue
		}
		seen[c.Name] = m.where()
		d.configs = append(d.configs, fileConfig{where: m.where(), config: c})
	}
	return d
}

// validate checks the EnvoyConfigs among docs as admission would if they
// were applied together: each is decoded (decodeConfigs), then judged by
// translate.Admit, the webhook's own check, with the content policy pol,
// against the other EnvoyConfigs of its fleet (same namespace and envoyRef)
// in docs.
func validate(docs []manifest, namespace string, pol translate.Policy) validation {
	d := decodeConfigs(docs, namespace)
	v := validation{configs: len(d.configs), skipped: d.skipped, problems: d.problems}
	fleets := map[fleet.ID][]fileConfig{}
	var order []fleet.ID
	for _, fc := range d.configs {
		key := fleetOf(fc.config)
		if _, ok := fleets[key]; !ok {
			order = append(order, key)
		}
		fleets[key] = append(fleets[key], fc)
	}
	v.fleets = len(fleets)
	for _, key := range order {
		configs := fleets[key]
		fc := fleetFiles{id: key}
		for _, c := range configs {
			fc.configs = append(fc.configs, c.config)
		}
		v.byFleet = append(v.byFleet, fc)
		for i, e := range configs {
			others := make([]translate.Config, 0, len(configs)-1)
			for j, o := range configs {
				if j != i {
					others = append(others, o.config)
				}
			}
			c := e.config
			for _, p := range translate.Admit(pol, others, c.Name, &c) {
				v.problems = append(v.problems, fmt.Sprintf("%s: EnvoyConfig %s: %s", e.where, c.Name, p))
			}
		}
	}
	return v
}

// fleetOf is the fleet of an EnvoyConfig: its namespace and envoyRef.
func fleetOf(c translate.Config) fleet.ID {
	ns, _, _ := strings.Cut(c.Name, "/")
	return fleet.ID{Namespace: ns, Name: c.Spec.EnvoyRef}
}

// nameOf is the document's metadata.name, for messages about a document
// that does not decode.
func nameOf(data []byte) string {
	var m struct {
		Metadata struct{ Namespace, Name string } `json:"metadata"`
	}
	_ = yaml.Unmarshal(data, &m)
	if m.Metadata.Namespace != "" {
		return m.Metadata.Namespace + "/" + m.Metadata.Name
	}
	return m.Metadata.Name
}

func isOnlyComments(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// reportValidation prints v, and fails when there are problems.
// loadInEnvoy has the Envoy at envoy load what each fleet of v would be
// served (loadServed): its EnvoyConfigs translated as the operator
// translates them, offline, so without the endpoints of Services or the
// Secrets they name. Envoy's refusals become v's problems.
func loadInEnvoy(ctx context.Context, envoy string, pol translate.Policy, v *validation) error {
	version, err := envoyVersion(ctx, envoy)
	if err != nil {
		return err
	}
	for _, f := range v.byFleet {
		ir := translate.Translate(translate.Input{Configs: f.configs, Policy: pol})
		refused, err := loadServed(ctx, envoy, version, ir.Resources)
		switch {
		case err != nil:
			return err
		case refused != "":
			v.problems = append(v.problems, fmt.Sprintf("fleet %s: %s", f.id, refused))
		default:
			v.loaded = append(v.loaded, fmt.Sprintf("fleet %s: Envoy %s loads what it would be served", f.id, version))
		}
	}
	return nil
}

// loadServed has the Envoy at envoy, of release version, load resources
// (envoyload), and returns what it said when it refused them.
func loadServed(ctx context.Context, envoy, version string, resources map[string][]types.Resource) (string, error) {
	var r envoyload.Resources
	for _, typeURL := range slices.Sorted(maps.Keys(resources)) {
		for _, m := range resources[typeURL] {
			if err := r.AddMessage(m); err != nil {
				return "", err
			}
		}
	}
	dir, err := os.MkdirTemp("", "kubectl-envoy-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	err = envoyload.Validate(ctx, envoy, dir, r)
	if !errors.Is(err, envoyload.ErrRefused) {
		return "", err
	}
	said := envoyload.Words(err)
	if strings.Contains(said, "missing the API listener extension") {
		said += " (an api_listener is for proxyless gRPC clients, which take it; Envoy does not)"
	}
	return fmt.Sprintf("Envoy %s refuses what it would be served: %s", version, said), nil
}

// envoyVersion is the release of the Envoy at path, from its --version.
func envoyVersion(ctx context.Context, path string) (string, error) {
	v, err := envoyload.Version(ctx, path)
	if err != nil {
		return "", fmt.Errorf("--envoy: %w", err)
	}
	return v, nil
}

// envoyBinary resolves --envoy: a path, or, given without one, $ENVOY or
// envoy on PATH.
func envoyBinary(flag string) (string, error) {
	path := flag
	if flag == envoyOnPath {
		path = os.Getenv("ENVOY")
	}
	if path == "" {
		var err error
		if path, err = exec.LookPath("envoy"); err != nil {
			return "", fmt.Errorf("--envoy: no envoy on PATH and ENVOY is not set: give its path, --envoy=PATH")
		}
	}
	// Envoy runs in a directory of its own: a relative path would be read from there.
	return filepath.Abs(path)
}

// envoyOnPath is --envoy given without a path.
const envoyOnPath = "envoy"

func reportValidation(w io.Writer, v validation) error {
	for _, p := range v.problems {
		fmt.Fprintln(w, p)
	}
	for _, l := range v.loaded {
		fmt.Fprintln(w, l)
	}
	if len(v.problems) > 0 {
		return fmt.Errorf("%d problem(s) in %d EnvoyConfig(s) of %d fleet(s)", len(v.problems), v.configs, v.fleets)
	}
	if v.configs == 0 {
		return fmt.Errorf("no EnvoyConfig found (%d other document(s) skipped)", v.skipped)
	}
	fmt.Fprintf(w, "%d EnvoyConfig(s) of %d fleet(s) are valid (%d other document(s) skipped)\n", v.configs, v.fleets, v.skipped)
	return nil
}
