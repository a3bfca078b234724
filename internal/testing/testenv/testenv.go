// Package testenv starts a real kube-apiserver and etcd (envtest) from the
// project's bin/ directory, with the project's CRDs installed, for the
// integration tests of every controller. It also counts the requests a client
// sends to the API server.
//
// It holds the one way the tests wait, envtest or not: Poll (Eventually, with
// Timeout) waits for what must happen, Consistently proves over a window that
// what must not happen does not, and Steady waits for a count to stop
// changing. A test sleeps only to pace what it drives (traffic, load), never
// to give something the time to happen.
package testenv

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RepoRoot returns the repository's top directory: the nearest parent of the
// working directory that holds the main go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/kube-envoy-controller/kube-envoy-controller\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no repository root above the working directory")
		}
		dir = parent
	}
}

// Option changes what New installs.
type Option func(*envtest.Environment, string)

// WithGatewayAPI installs the Gateway API's CRDs (config/crd/gateway-api)
// too; only the packages that use them pay for their install.
func WithGatewayAPI() Option {
	return func(env *envtest.Environment, root string) {
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, filepath.Join(root, "config", "crd", "gateway-api"))
	}
}

// New returns an envtest environment that runs bin/kube-apiserver and bin/etcd
// (built by `make tools`) and installs config/crd/bases. Start it with Start.
func New(opts ...Option) (*envtest.Environment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, "bin")
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make tools` first", filepath.Join("bin", b))
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	for _, o := range opts {
		o(env, root)
	}
	// envtest gives etcd and kube-apiserver 20 s to start (and to stop),
	// which a loaded 2-core machine running several API servers exceeds; it
	// then retries on the same ports while the first kube-apiserver still
	// holds them, and every retry fails. Like Timeout, the bound only ends
	// a start that will not succeed. KUBEBUILDER_CONTROLPLANE_START_TIMEOUT
	// and _STOP_TIMEOUT still set them.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = Timeout
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		env.ControlPlaneStopTimeout = Timeout
	}
	return env, nil
}

// RequestCounter counts the requests that go through the transports it wraps,
// by HTTP method. Only requests that were actually sent are counted.
type RequestCounter struct {
	mu     sync.Mutex
	writes []string
}

// Wrap returns a copy of cfg whose requests are counted.
func (c *RequestCounter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if isWrite(req.Method) {
				c.mu.Lock()
				c.writes = append(c.writes, req.Method+" "+req.URL.Path)
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	return out
}

// Writes returns the write requests (POST, PUT, PATCH, DELETE) seen since the
// last Reset, as "METHOD path", in the order sent.
func (c *RequestCounter) Writes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...)
}

// WritesTo returns the write requests whose path contains part, sorted.
func (c *RequestCounter) WritesTo(part string) []string {
	var out []string
	for _, w := range c.Writes() {
		if strings.Contains(w, part) {
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// Reset forgets the requests counted so far.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = nil
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
