//go:build install

// Package install tests the operator as it is installed: dist/install.yaml
// applied to a fresh local cluster, and the operator binary running on this
// host with the installed ServiceAccount's token, so that every request it
// sends is authorized by the installed RBAC. hack/install-e2e.sh prepares all
// of it; KWOK runs no containers, so the operator cannot run in its pods.
package install

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// Namespace and ServiceAccount of the installation.
const (
	operatorNamespace = "kube-envoy-controller"
	serviceAccount    = "kube-envoy-controller"
	saUser            = "system:serviceaccount:" + operatorNamespace + ":" + serviceAccount
)

var (
	root       string // the repository
	dir        string // logs and certificates of this run
	adminCfg   *rest.Config
	saCfg      *rest.Config // the operator's ServiceAccount
	admin      client.Client
	kubectl    framework.Kubectl // as the cluster's admin
	webhookURL int               // the port the webhook configurations call (hack/webhook-local.sh)
)

func TestMain(m *testing.M) {
	for _, v := range []string{"KUBECONFIG", "INSTALL_ROOT", "INSTALL_DIR", "INSTALL_SA_KUBECONFIG", "INSTALL_BINARY", "INSTALL_WEBHOOK_PORT", "INSTALL_CHART"} {
		if os.Getenv(v) == "" {
			fmt.Fprintf(os.Stderr, "%s is not set: the install tests run through hack/install-e2e.sh (make e2e-install)\n", v)
			os.Exit(1)
		}
	}
	root, dir = os.Getenv("INSTALL_ROOT"), os.Getenv("INSTALL_DIR")
	kubectl = framework.NewKubectl(root, "")
	var err error
	if webhookURL, err = strconv.Atoi(os.Getenv("INSTALL_WEBHOOK_PORT")); err != nil {
		fmt.Fprintln(os.Stderr, "INSTALL_WEBHOOK_PORT:", err)
		os.Exit(1)
	}
	if adminCfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG")); err == nil {
		saCfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("INSTALL_SA_KUBECONFIG"))
	}
	if err == nil {
		admin, err = client.New(adminCfg, client.Options{Scheme: manager.NewScheme()})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// replica is one operator process on this host, running as the ServiceAccount.
type replica struct {
	name                                 string
	cmd                                  *exec.Cmd
	log                                  string
	health, metrics, xds, webhook, debug int
	exited                               chan struct{} // closed when the process has exited
	err                                  error         // what Wait returned, once exited
}

// startReplica starts the operator with leader election and every server the
// in-cluster Deployment runs (config/manager/manager.yaml), on local ports.
// webhookPort 0 picks a free one. It is stopped when the test ends.
func startReplica(t *testing.T, name string, webhookPort int) *replica {
	t.Helper()
	r := &replica{name: name, log: filepath.Join(dir, "operator-"+name+".log"), exited: make(chan struct{})}
	r.health, r.metrics, r.xds, r.debug = freePort(t), freePort(t), freePort(t), freePort(t)
	r.webhook = webhookPort
	if r.webhook == 0 {
		r.webhook = freePort(t)
	}
	logFile, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(os.Getenv("INSTALL_BINARY"),
		"--kubeconfig", os.Getenv("INSTALL_SA_KUBECONFIG"),
		"--leader-elect", "--leader-election-namespace", operatorNamespace,
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", r.health),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", r.metrics),
		"--xds-bind-address", fmt.Sprintf("127.0.0.1:%d", r.xds),
		"--debug-bind-address", fmt.Sprintf("127.0.0.1:%d", r.debug),
		"--webhook-bind-address", fmt.Sprintf("127.0.0.1:%d", r.webhook),
		"--webhook-cert-dns-name", "localhost", "--webhook-cert-write-files",
		"--webhook-cert-dir", filepath.Join(dir, "certs-"+name),
	)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	// The replica dies with the test binary, whatever happens to it.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); logFile.Close(); close(r.exited) }()
	t.Cleanup(func() { r.stop(t, syscall.SIGTERM) })
	return r
}

// running reports whether the process has not exited.
func (r *replica) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// stop signals the replica and waits for it to exit (30 s, then SIGKILL).
func (r *replica) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if !r.running() {
		return
	}
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("replica %s did not stop within 30s of %v", r.name, sig)
		_ = r.cmd.Process.Kill()
	}
}

// waitReady waits until the replica's /readyz passes and its metrics server
// listens.
func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "replica "+r.name+" to be ready", func() (bool, error) {
		if !r.running() {
			t.Fatalf("replica %s exited:\n%s", r.name, tail(r.log, 30))
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz?verbose", r.health))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("readyz: %s", resp.Status)
		}
		// The metrics server may listen a moment after readyz answers: the
		// tests scrape it next.
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.metrics))
		if err != nil {
			return false, fmt.Errorf("metrics: %w", err)
		}
		return true, conn.Close()
	})
}

// scrape returns the value of the first sample of metric on the replica's
// /metrics, read over HTTPS with token; -1 if there is none.
func (r *replica) scrape(token, metric string) (float64, int, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", r.metrics), nil)
	if err != nil {
		return 0, 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The metrics server's certificate is self-signed.
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, resp.StatusCode, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, resp.StatusCode, err
	}
	return -1, resp.StatusCode, sc.Err()
}

// freePort returns a free local port below the ephemeral range, from which
// outgoing connections (the cluster's own among them) take theirs.
func freePort(t *testing.T) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 21000 {
				low = n
			}
		}
	}
	for range 200 {
		p := 20000 + rand.IntN(low-20000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatal("no free port")
	return 0
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
