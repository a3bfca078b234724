package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const testVersion = "v0.0.0-test.1"

var (
	platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	created   = time.Unix(1700000000, 0).UTC()
	spec      = Spec{Version: testVersion, Revision: "0123456789abcdef", Source: DefaultSource, Created: created}

	compileOnce sync.Once
	binaries    map[string]Inputs
	compileErr  error

	assembleOnce sync.Once
	assembledIdx v1.ImageIndex
	assembleErr  error
)

// assembled is the image of the compiled binaries, assembled once.
func assembled(t *testing.T) v1.ImageIndex {
	t.Helper()
	bins := compiled(t)
	assembleOnce.Do(func() { assembledIdx, assembleErr = Assemble(withEnvoyVersion(t, spec), platforms, bins) })
	if assembleErr != nil {
		t.Fatal(assembleErr)
	}
	return assembledIdx
}

// compiled builds, once for every test in this package, a binary per
// platform: the operator for this machine's platform, which the image test
// runs, and for the others a small static program (testdata/static), with
// the same settings. An image's platforms are assembled and checked alike
// whatever their binary; compiling the operator for another architecture
// would compile every one of its dependencies again, for nothing a test
// runs (make image builds it for every platform). Likewise this machine's
// platform gets the pinned Envoy and libc6 that make image uses
// (depsDir), which the image test runs, and the others the static program
// as their Envoy, which needs no C library.
func compiled(t *testing.T) map[string]Inputs {
	t.Helper()
	compileOnce.Do(func() {
		dir, err := os.MkdirTemp("", "image-test-")
		if err != nil {
			compileErr = err
			return
		}
		binaries = map[string]Inputs{}
		for _, p := range platforms {
			out := filepath.Join(dir, p.Architecture, BinaryName)
			start := time.Now()
			repo, pkg := "../..", "./cmd/kube-envoy-controller"
			if p.Architecture != runtime.GOARCH {
				repo, pkg = ".", "./testdata/static"
			}
			if compileErr = compile(context.Background(), repo, pkg, p, spec.Version, spec.Revision, out); compileErr != nil {
				return
			}
			fmt.Printf("compiled %s in %s\n", p, time.Since(start).Round(100*time.Millisecond))
			in := Inputs{Operator: out, Envoy: out}
			if p.Architecture == runtime.GOARCH {
				plat := filepath.Join(depsDir(), p.OS+"_"+p.Architecture)
				in.Envoy, in.Libc = filepath.Join(plat, "envoy"), filepath.Join(plat, "libc6")
				for _, f := range []string{in.Envoy, filepath.Join(plat, "libc6.version")} {
					if _, err := os.Stat(f); err != nil {
						compileErr = fmt.Errorf("%v: make unit or make image puts the pinned Envoy and libc6 there", err)
						return
					}
				}
			}
			binaries[p.String()] = in
		}
	})
	if compileErr != nil {
		t.Fatal(compileErr)
	}
	return binaries
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binaries != nil {
		for _, in := range binaries {
			os.RemoveAll(filepath.Dir(filepath.Dir(in.Operator)))
			break
		}
	}
	os.Exit(code)
}

func TestImage(t *testing.T) {
	bins := compiled(t)
	idx := assembled(t)
	// The layers' contents are validated once, below, as written to disk.
	if err := validate.Index(idx, validate.Fast); err != nil {
		t.Fatalf("the index is not valid: %v", err)
	}

	// Reproducible: the same binaries and spec give the same digest.
	again, err := Assemble(withEnvoyVersion(t, spec), platforms, bins)
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := digest(t, idx), digest(t, again)
	if d1 != d2 {
		t.Fatalf("two builds gave %s and %s", d1, d2)
	}

	// The OCI layout: index.json names one index, tagged with the version,
	// which holds an image per platform.
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, idx, testVersion); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "oci-layout")); err != nil || !strings.Contains(string(b), `"imageLayoutVersion"`) {
		t.Fatalf("oci-layout: %q, %v", b, err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex ||
		tm.Manifests[0].Digest.String() != d1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("index.json: want one OCI index %s named %s, got %+v", d1, testVersion, tm.Manifests)
	}
	read, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(read); err != nil {
		t.Fatalf("the index read back is not valid: %v", err)
	}
	im, err := read.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("want %d manifests, got %d", len(platforms), len(im.Manifests))
	}
	for i, p := range platforms {
		d := im.Manifests[i]
		if d.Platform == nil || d.Platform.OS != p.OS || d.Platform.Architecture != p.Architecture || d.MediaType != types.OCIManifestSchema1 {
			t.Fatalf("manifest %d: want an OCI manifest for %s, got %+v", i, p, d)
		}
		img, err := read.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, p)
	}
}

// checkImage checks one platform's image: its configuration, its files, and
// that its binary is static and built for p. The binary for this machine's
// architecture runs --version.
func checkImage(t *testing.T, img v1.Image, p v1.Platform) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("%s: created %v, want %v", p, cf.Created.Time, created)
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(created) {
			t.Errorf("%s: history %q created %v, want %v", p, h.CreatedBy, h.Created.Time, created)
		}
	}
	c := cf.Config
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != BinaryPath || len(c.Cmd) != 0 {
		t.Errorf("%s: entrypoint %q cmd %q, want [%s]", p, c.Entrypoint, c.Cmd, BinaryPath)
	}
	if c.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532 (nonroot)", p, c.User)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   DefaultSource,
		"org.opencontainers.image.revision": spec.Revision,
		"org.opencontainers.image.version":  testVersion,
	} {
		if c.Labels[k] != v {
			t.Errorf("%s: label %s=%q, want %q", p, k, c.Labels[k], v)
		}
	}

	files := flatten(t, img)
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot user 65532: %q", p, files["etc/passwd"].data)
	}
	bin, ok := files[strings.TrimPrefix(BinaryPath, "/")]
	if !ok {
		t.Fatalf("%s: no %s in the image", p, BinaryPath)
	}
	if bin.hdr.Mode&0o111 == 0 || bin.hdr.Uid != 0 {
		t.Errorf("%s: %s has mode %o uid %d, want executable and owned by root", p, BinaryPath, bin.hdr.Mode, bin.hdr.Uid)
	}
	for n, f := range files {
		if !f.hdr.ModTime.Equal(created) {
			t.Errorf("%s: %s modified %v, want %v", p, n, f.hdr.ModTime, created)
		}
	}
	ef, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("%s: the binary is not ELF: %v", p, err)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	if ef.Machine != machine {
		t.Errorf("%s: the binary is for %v", p, ef.Machine)
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s: the binary has an interpreter: it is not static", p)
		}
	}
	checkEnvoy(t, files, p)
	if p.Architecture != runtime.GOARCH {
		return
	}
	path := filepath.Join(t.TempDir(), BinaryName)
	if err := os.WriteFile(path, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", BinaryPath, err, out)
	}
	if want := "kube-envoy-controller " + testVersion + " (revision " + spec.Revision; !strings.HasPrefix(string(out), want) {
		t.Errorf("--version printed %q, want it to start with %q", out, want)
	}
}

// checkEnvoy checks the image's Envoy (files, for p): an executable for p
// at EnvoyPath, owned by root, with its history. On this machine's platform
// it is the pinned Envoy, and it runs from the image's file system alone:
// the layers are unpacked into a directory, Envoy runs there with the
// image's own loader and libraries as the image's user (runInRoot), and a
// library missing from the image fails it. It prints the pinned version,
// and validates a configuration as the operator has it do.
func checkEnvoy(t *testing.T, files map[string]tarFile, p v1.Platform) {
	t.Helper()
	envoy, ok := files[strings.TrimPrefix(EnvoyPath, "/")]
	if !ok {
		t.Fatalf("%s: no %s in the image", p, EnvoyPath)
	}
	if envoy.hdr.Mode&0o111 == 0 || envoy.hdr.Uid != 0 {
		t.Errorf("%s: %s has mode %o uid %d, want executable and owned by root", p, EnvoyPath, envoy.hdr.Mode, envoy.hdr.Uid)
	}
	ef, err := elf.NewFile(bytes.NewReader(envoy.data))
	if err != nil {
		t.Fatalf("%s: Envoy is not ELF: %v", p, err)
	}
	if want := arches[p.Architecture].machine; ef.Machine != want {
		t.Errorf("%s: Envoy is for %v, want %v", p, ef.Machine, want)
	}
	if p.Architecture != runtime.GOARCH {
		return
	}
	pinned := pinnedEnvoyVersion(t)
	if _, ok := files[strings.TrimPrefix(LibcCopyright, "/")]; !ok {
		t.Errorf("%s: no %s beside the glibc the image carries", p, LibcCopyright)
	}
	root := unpack(t, files)
	out, err := runInRoot(root, EnvoyPath, "--version")
	if err != nil {
		t.Fatalf("%s: %s --version in the image's file system: %v\n%s", p, EnvoyPath, err, out)
	}
	if !strings.Contains(out, "/"+pinned+"/") {
		t.Errorf("%s: %s --version printed %q, want the pinned version %s", p, EnvoyPath, out, pinned)
	}
	cfg := `{static_resources: {clusters: [{name: c, connect_timeout: 1s}]}}`
	if out, err := runInRoot(root, EnvoyPath, "--mode", "validate", "--config-yaml", cfg, "--log-level", "error"); err != nil || !strings.Contains(out, "OK") {
		t.Errorf("%s: %s --mode validate in the image's file system: %v\n%s", p, EnvoyPath, err, out)
	}
}

// unpack writes an image's file system (files) into a new directory, which
// it returns; only the image's user needs to read it.
func unpack(t *testing.T, files map[string]tarFile) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, f := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err != nil {
			t.Fatal(err)
		}
		switch f.hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(f.hdr.Linkname, p)
		case tar.TypeReg:
			err = os.WriteFile(p, f.data, os.FileMode(f.hdr.Mode).Perm())
		default:
			err = fmt.Errorf("%s: an entry of type %q", name, f.hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// withEnvoyVersion returns s with the pinned Envoy version.
func withEnvoyVersion(t *testing.T, s Spec) Spec {
	t.Helper()
	s.EnvoyVersion = pinnedEnvoyVersion(t)
	return s
}

func pinnedEnvoyVersion(t *testing.T) string {
	t.Helper()
	v, err := PinnedEnvoyVersion("../..")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// depsDir is where make fills each platform's Envoy and libc6 (--deps):
// $IMAGE_DEPS, or the Makefile's bin/image-deps.
func depsDir() string {
	if d := os.Getenv("IMAGE_DEPS"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "bin", "image-deps")
}

// TestPushAndBase pushes the image to a registry (in-process) and builds on a
// base image taken from that registry, as with IMAGE_BASE. A base must carry
// what Envoy needs to start: one without glibc is refused, naming the
// loader it lacks.
func TestPushAndBase(t *testing.T) {
	bins := compiled(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	idx := assembled(t)
	tag, err := name.NewTag(host + "/kube-envoy-controller:" + testVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(tag)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := digest(t, pulled), digest(t, idx); got != want {
		t.Fatalf("pulled %s, pushed %s", got, want)
	}

	// A base with its own layer and environment, one image per platform,
	// with (base:1) and without (static:1) the glibc that this machine's
	// Envoy needs: the other platforms' stand-in needs none.
	baseIdx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	staticIdx := baseIdx
	for _, p := range platforms {
		layer, err := tarLayer(created, []entry{dir("etc/", 0o755), file("etc/base-release", 0o644, []byte("test base "+p.Architecture+"\n"))})
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.Config(img, v1.Config{Env: []string{"BASE=1"}}); err != nil {
			t.Fatal(err)
		}
		staticIdx = mutate.AppendManifests(staticIdx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		envoy, err := os.ReadFile(bins[p.String()].Envoy)
		if err != nil {
			t.Fatal(err)
		}
		n, err := dynamicNeeds(envoy, p)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = withLibc(img, n, bins[p.String()].Libc, created); err != nil {
			t.Fatal(err)
		}
		baseIdx = mutate.AppendManifests(baseIdx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	baseRef, staticRef := host+"/base:1", host+"/static:1"
	for ref, idx := range map[string]v1.ImageIndex{baseRef: baseIdx, staticRef: staticIdx} {
		if err := remote.WriteIndex(mustTag(t, ref), idx); err != nil {
			t.Fatal(err)
		}
	}
	static, err := remote.Index(mustTag(t, staticRef))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Assemble(withEnvoyVersion(t, Spec{Version: testVersion, Revision: spec.Revision, Source: DefaultSource, Created: created, Base: static, BaseName: staticRef}), platforms, bins)
	loader := "no " + map[string]string{"amd64": "/lib64", "arm64": "/lib"}[runtime.GOARCH]
	if err == nil || !strings.Contains(err.Error(), "cannot run Envoy") || !strings.Contains(err.Error(), loader) {
		t.Errorf("a base without glibc: want it refused for Envoy's loader (%s), got %v", loader, err)
	}
	base, err := remote.Index(mustTag(t, baseRef))
	if err != nil {
		t.Fatal(err)
	}
	onBase, err := Assemble(withEnvoyVersion(t, Spec{Version: testVersion, Revision: spec.Revision, Source: DefaultSource, Created: created, Base: base, BaseName: baseRef}), platforms, bins)
	if err != nil {
		t.Fatal(err)
	}
	im, err := onBase.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range platforms {
		img, err := onBase.Image(im.Manifests[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		files := flatten(t, img)
		if got := string(files["etc/base-release"].data); got != "test base "+p.Architecture+"\n" {
			t.Errorf("%s: the base's file reads %q", p, got)
		}
		if _, ok := files[strings.TrimPrefix(BinaryPath, "/")]; !ok {
			t.Errorf("%s: no binary on the base", p)
		}
		if _, ok := files[strings.TrimPrefix(EnvoyPath, "/")]; !ok {
			t.Errorf("%s: no Envoy on the base", p)
		}
		if _, ok := files["etc/passwd"]; ok {
			t.Errorf("%s: the minimal base's /etc/passwd is on a given base", p)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != User || cf.Config.Labels["org.opencontainers.image.base.name"] != baseRef || len(cf.Config.Env) != 1 || cf.Config.Env[0] != "BASE=1" {
			t.Errorf("%s: config %+v: want the user, the base's label and its environment", p, cf.Config)
		}
	}
}

// TestLibcMissing: the built-in base takes from libc6 what Envoy needs, and
// refuses a libc6 that lacks a library, naming it, or the loader, rather
// than build an image whose Envoy could not start.
func TestLibcMissing(t *testing.T) {
	bins := compiled(t)
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	in := bins[p.String()]
	envoy, err := os.ReadFile(in.Envoy)
	if err != nil {
		t.Fatal(err)
	}
	n, err := dynamicNeeds(envoy, p)
	if err != nil {
		t.Fatal(err)
	}
	if n.interp == "" || len(n.libs) == 0 {
		t.Fatalf("the pinned Envoy names no loader or library: %+v", n)
	}
	tree := dirTree(in.Libc)
	interp, _, _, err := tree.file(n.interp)
	if err != nil {
		t.Fatal(err)
	}
	lib, _, _, err := tree.library("libm.so.6", n.dirs)
	if err != nil {
		t.Fatal(err)
	}
	for missing, want := range map[string]string{lib: "no libm.so.6 in ", interp: "no " + interp} {
		t.Run(path.Base(missing), func(t *testing.T) {
			libc := filepath.Join(t.TempDir(), "libc6")
			if out, err := exec.Command("cp", "-a", in.Libc, libc).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if err := os.Remove(filepath.Join(libc, filepath.FromSlash(missing))); err != nil {
				t.Fatal(err)
			}
			_, err := Assemble(withEnvoyVersion(t, spec), []v1.Platform{p}, map[string]Inputs{p.String(): {Operator: in.Operator, Envoy: in.Envoy, Libc: libc}})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("libc6 without %s: want it refused with %q; got %v", missing, want, err)
			}
		})
	}
}

func TestParsePlatforms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{in: "linux/amd64,linux/arm64", want: "linux/amd64 linux/arm64"},
		{in: "linux/arm/v7", want: "linux/arm/v7"},
		{in: "windows/amd64", err: true},
		{in: "", err: true},
	} {
		got, err := ParsePlatforms(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%q: error %v", tc.in, err)
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, " ") != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, s, tc.want)
		}
	}
}

type tarFile struct {
	hdr  *tar.Header
	data []byte
}

// flatten returns the image's file system, upper layers over lower ones.
func flatten(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]tarFile{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(h.Name, "/")] = tarFile{hdr: h, data: b}
	}
}

func digest(t *testing.T, idx v1.ImageIndex) string {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}
