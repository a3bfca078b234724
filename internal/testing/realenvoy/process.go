package realenvoy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
)

// Process is one Envoy running on this host as a proxy of a fleet.
type Process struct {
	// Pod is the pod it stands for: its node id.
	Pod string
	// Admin is the base URL of its admin interface, reachable from the host
	// (http://127.0.0.1:port; in its pod's network namespace, http://POD-IP:port).
	Admin string
	cmd   *exec.Cmd
	done  chan struct{}
	err   error
}

// FreePorts returns n TCP ports that are free on every address at the time
// of the call, from 20000 to 29999: below the kernel's ephemeral range, so
// that no outgoing connection takes one before the Envoy it is for binds it,
// and above the ports kwokctl gives a cluster's components (from 32767
// down). The ports of one process are handed out once each, in turn.
func FreePorts(n int) ([]uint32, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []uint32
	for tries := 0; len(ports) < n && tries < portsSpan; tries++ {
		p := portsFirst + (portsNext+tries)%portsSpan
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports = append(ports, uint32(p))
		portsNext = (portsNext + tries + 1) % portsSpan
		tries = -1
	}
	if len(ports) < n {
		return nil, fmt.Errorf("no %d free ports from %d to %d", n, portsFirst, portsFirst+portsSpan-1)
	}
	return ports, nil
}

const portsFirst, portsSpan = 20000, 10000

var (
	portsMu sync.Mutex
	// portsNext starts where another process of the machine is unlikely to.
	portsNext = rand.IntN(portsSpan)
)

// Run adapts p to this host under root, with the xDS server at xds, free
// admin and ready ports and, with delta, the incremental protocol, writes its files and starts Envoy from bin
// with its container's arguments, Envoy's output going to log. Envoy is
// killed if the calling process dies; Stop stops it.
func Run(bin string, p Proxy, root, xds string, delta bool, log io.Writer) (*Process, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	h := Host{Root: root, XDS: xds, AdminPort: ports[0], ReadyPort: ports[1], Delta: delta}
	return start(exec.Command(bin), p, h, fmt.Sprintf("http://127.0.0.1:%d", ports[0]), log)
}

// RunPod is Run in the pod's own network namespace (podnet.AddPod): Envoy
// binds its listeners as in its pod, keeps the pod's admin and ready ports,
// and its admin interface binds every address of the pod, so that
// Process.Admin is the pod's address. An xDS server on the host's loopback
// or on every address (127.0.0.1:18000, :18000) is reached at
// podnet.Gateway; the xDS cluster's TLS settings stay, as in Run.
func RunPod(bin string, p Proxy, pod podnet.Pod, root, xds string, delta bool, log io.Writer) (*Process, error) {
	host, port, err := net.SplitHostPort(xds)
	if err != nil {
		return nil, fmt.Errorf("xDS address %q: %w", xds, err)
	}
	if ip := net.ParseIP(host); host == "" || host == "localhost" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		xds = net.JoinHostPort(podnet.Gateway, port)
	}
	h := Host{Root: root, XDS: xds, AdminAddress: "0.0.0.0", Delta: delta}
	a, err := Adapt(p, h)
	if err != nil {
		return nil, err
	}
	admin, err := adminPort(a)
	if err != nil {
		return nil, err
	}
	return start(podnet.Command(pod.Netns, bin), p, h, "http://"+net.JoinHostPort(pod.IP, admin), log)
}

// adminPort is the admin interface's port in a's bootstrap.
func adminPort(a Proxy) (string, error) {
	for path, data := range a.Files {
		if filepath.Base(path) != proxy.BootstrapKey {
			continue
		}
		tree, err := decode(data)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if port := dig(tree, "admin", "address", "socket_address", "port_value"); port != nil {
			return fmt.Sprint(port), nil
		}
		return "", fmt.Errorf("%s: no admin port", path)
	}
	return "", fmt.Errorf("pod %s: no bootstrap %s", a.Pod, proxy.BootstrapKey)
}

// start adapts p to h, writes its files and starts cmd (the Envoy binary,
// or a command that executes it) with its container's arguments.
func start(cmd *exec.Cmd, p Proxy, h Host, admin string, log io.Writer) (*Process, error) {
	a, err := Adapt(p, h)
	if err != nil {
		return nil, err
	}
	if err := Write(a); err != nil {
		return nil, err
	}
	cmd.Args = append(cmd.Args, a.Args...)
	cmd.Dir = h.Root
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	proc := &Process{Pod: p.Pod, cmd: cmd, done: make(chan struct{}), Admin: admin}
	go func() {
		proc.err = cmd.Wait()
		close(proc.done)
	}()
	return proc, nil
}

// Exited reports whether Envoy has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed once Envoy has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid is Envoy's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends Envoy SIGTERM, as the kubelet does, and SIGKILL if it has not
// exited within grace.
func (p *Process) Stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

var adminClient = &http.Client{Timeout: 5 * time.Second}

// Get returns the body of the admin interface's path.
func (p *Process) Get(ctx context.Context, path string) (string, error) {
	return p.admin(ctx, http.MethodGet, path)
}
func (p *Process) admin(ctx context.Context, method, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.Admin+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// Stat returns the value of one of Envoy's counters or gauges, or an error
// when Envoy has no such stat.
func (p *Process) Stat(ctx context.Context, name string) (int64, error) {
	body, err := p.Get(ctx, "/stats?filter=^"+strings.ReplaceAll(name, ".", `\.`)+"$")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(body, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok && k == name {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%w: %s", ErrNoStat, name)
}

// ErrNoStat is Stat's error for a stat Envoy does not have.
var ErrNoStat = errors.New("envoy has no such stat")

// IsReady reports whether Envoy's /ready says LIVE: it has its first
// configuration from the xDS server.
func (p *Process) IsReady(ctx context.Context) bool {
	body, err := p.Get(ctx, "/ready")
	return err == nil && strings.TrimSpace(body) == "LIVE"
}
