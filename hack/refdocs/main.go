// Command refdocs writes the facts of the reference pages in
// docs/reference from the source they describe (make generate):
//
//   - flags.md: the flags of kube-envoy-controller, from the FlagSet that
//     internal/cmdline registers, with their defaults and usage strings;
//   - metrics.md: the operator's Prometheus metrics, from the descriptors of
//     the collectors its packages register on controller-runtime's registry;
//   - conditions.md: each kind's condition types, condition reasons and
//     event reasons, from the constants and doc comments of
//     api/<group>/<version>/conditions.go;
//   - api-fields.md: every field of each kind, from the OpenAPI schemas of
//     the CustomResourceDefinitions in config/crd/bases.
//
// Of the first three it rewrites only the text between the marker comments
// <!-- BEGIN GENERATED: name --> and <!-- END GENERATED: name -->; the prose
// around them is written by hand. api-fields.md it writes whole.
//
//	go run ./hack/refdocs [-root DIR]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kube-envoy-controller/kube-envoy-controller/hack/refdocs/internal/recorder"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/cmdline"
	_ "github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	_ "github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	_ "github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	_ "github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/stats"
)

// metricPrefix names the operator's own metrics; controller-runtime's are
// described in the page's prose.
const metricPrefix = "kube_envoy_controller_"

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "refdocs:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	ref := filepath.Join(root, "docs", "reference")

	// The flags as they are when the environment sets none of their
	// defaults: the usage strings say what it may set.
	if err := os.Unsetenv("POD_NAMESPACE"); err != nil {
		return err
	}
	fs := flag.NewFlagSet("kube-envoy-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cmdline.Register(fs, "")
	if err := rewriteSection(filepath.Join(ref, "flags.md"), "flags", flagsTable(fs)); err != nil {
		return err
	}

	if err := recorder.Check(metricPrefix); err != nil {
		return err
	}
	metrics, err := metricsTable(recorder.Collectors(), metricPrefix)
	if err != nil {
		return err
	}
	if err := rewriteSection(filepath.Join(ref, "metrics.md"), "metrics", metrics); err != nil {
		return err
	}

	kinds, err := apiConditions(filepath.Join(root, "api"))
	if err != nil {
		return err
	}
	if err := rewriteSection(filepath.Join(ref, "conditions.md"), "conditions", conditionsReference(kinds)); err != nil {
		return err
	}

	crds, err := readCRDs(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		return err
	}
	pkgs, err := readAPIPackages(filepath.Join(root, "api"))
	if err != nil {
		return err
	}
	page, err := apiFieldsPage(crds, func(group, version, kind string) (map[string]string, error) {
		return externalFields(pkgs, group, version, kind)
	})
	if err != nil {
		return err
	}
	return writeIfChanged(filepath.Join(ref, "api-fields.md"), page)
}

// rewriteSection replaces a generated section of a page.
func rewriteSection(path, name, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	page, err := replaceSection(string(b), name, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeIfChanged(path, page)
}

// writeIfChanged writes a file unless it already holds text, so that an
// up-to-date page keeps its modification time.
func writeIfChanged(path, text string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == text {
		return nil
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
