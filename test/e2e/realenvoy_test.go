//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// The tests with real Envoys. KWOK's pods run nothing, so each fleet's
// proxies run on this host as Envoy processes, one per pod, from the
// bootstrap the operator rendered (realenvoy.Kubelet), and the pods behind
// a Service answer on their addresses (podnet, which TestMain serves on
// port 8080 for every namespace). The listeners of a fleet's Envoys are on
// this host's ports: the Envoys of one fleet share them (SO_REUSEPORT, as a
// Service spreads connections), and each test gives its fleets ports of
// their own, but for the samples', whose ports only TestRealEnvoySamples
// uses.

// requirePodNet fails under CI, and skips elsewhere, when the pods'
// network is not up.
func requirePodNet(t *testing.T) {
	t.Helper()
	n, err := podnet.Current()
	if err != nil {
		t.Fatal(err)
	}
	if !podnet.Available(n.Namespace()) {
		testenv.Require(t, fmt.Errorf("the pods' network %s is not up (hack/podnet.sh up, as root)", n.Namespace()))
	}
}

// runEnvoys runs the Envoys of the pods of fleet in ns on this host until
// the test ends.
func runEnvoys(t *testing.T, ns, fleet string, delta bool) *realenvoy.Kubelet {
	t.Helper()
	k := &realenvoy.Kubelet{Client: clientset, Namespace: ns, Selector: "app.kubernetes.io/instance=" + fleet,
		Envoy: realenvoy.Require(t), XDS: os.Getenv("E2E_XDS_ADDR"), Dir: t.TempDir(), Delta: delta}
	stop := k.Start(func(err error) { t.Logf("host proxies of %s/%s: %v", ns, fleet, err) })
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			logs, _ := os.ReadDir(k.Dir)
			for _, l := range logs {
				if strings.HasSuffix(l.Name(), ".log") {
					b, _ := os.ReadFile(k.Dir + "/" + l.Name())
					t.Logf("--- %s (last 3000 bytes):\n%s", l.Name(), tail(b, 3000))
				}
			}
		}
	})
	return k
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// only returns the one Envoy of procs, or nil.
func only(procs map[string]*realenvoy.Process) (string, *realenvoy.Process) {
	if len(procs) != 1 {
		return "", nil
	}
	for pod, p := range procs {
		return pod, p
	}
	return "", nil
}

var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get sends one request through Envoy and returns the status, the
// answering pod's track and name.
func get(url string) (int, string, string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, "", "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Track"), strings.TrimSpace(string(body)), nil
}

// waitReadyEndpoints waits until the EndpointSlices of the Service svc
// list n ready endpoints.
func waitReadyEndpoints(t *testing.T, ns, svc string, n int) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%d ready endpoints of %s", n, svc), func() (bool, error) {
		out, err := kubectl.JSONPath(ns, "endpointslices -l kubernetes.io/service-name="+svc,
			`{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{" "}{end}`)
		if err != nil {
			return false, err
		}
		return len(strings.Fields(out)) == n, fmt.Errorf("ready: %q", out)
	})
}

// waitServed waits until url answers 200 from a pod of track.
func waitServed(t *testing.T, url, track string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, url+" served by "+track, func() (bool, error) {
		code, got, body, err := get(url)
		if err != nil {
			return false, err
		}
		return code == 200 && got == track, fmt.Errorf("%d from track %q: %s", code, got, body)
	})
}

// The samples, served to real Envoys and proven with traffic: the routing
// sample answers from the Service web, the canary splits 90/10, and TLS is
// terminated with the certificate of the Secret web-tls.
func TestRealEnvoySamples(t *testing.T) {
	t.Parallel()
	requirePodNet(t)
	ns := namespace(t, "e2e-real-samples")
	cert, key := xdstest.ServingCertificate(t, "web.example.com")
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/tls.crt", cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/tls.key", key, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl.Run(t, "-n", ns, "create", "secret", "tls", "web-tls", "--cert", dir+"/tls.crt", "--key", dir+"/tls.key")
	kubectl.Run(t, "-n", ns, "label", "secret", "web-tls", "kube-envoy-controller.io/xds-secret=tls")
	for _, s := range []string{"example_v1_envoyconfig_http.yaml", "example_v1_envoyconfig_http_canary.yaml", "example_v1_envoyconfig_https.yaml"} {
		kubectl.Run(t, "-n", ns, "apply", "-f", sample(s))
	}
	k := runEnvoys(t, ns, "web-gateway", false)
	k.WaitLive(t, 2, 2*time.Minute)
	for _, ec := range []string{"web-routing", "web-canary", "web-tls"} {
		kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoyconfig "+ec, "{.status.proxies.acked}", "2")
	}

	// Routing: every request reaches a pod of web.
	waitServed(t, "http://127.0.0.1:8080/", "stable")

	// The canary: 90 to web, 10 to web-canary. Over 100 requests, the
	// canary's count is binomial (100, 0.1): outside [2, 25] with a
	// probability below 1 in 1000.
	waitServed(t, "http://127.0.0.1:8081/", "stable")
	framework.Eventually(t, time.Minute, "web-canary's pod behind the canary", func() (bool, error) {
		_, track, _, err := get("http://127.0.0.1:8081/")
		return track == "canary", err
	})
	counts := map[string]int{}
	for range 100 {
		code, track, body, err := get("http://127.0.0.1:8081/")
		if err != nil || code != 200 {
			t.Fatalf("a request through the canary: %d %v %s", code, err, body)
		}
		counts[track]++
	}
	t.Logf("the canary over 100 requests: %v", counts)
	if counts["canary"] < 2 || counts["canary"] > 25 || counts["stable"]+counts["canary"] != 100 {
		t.Errorf("the canary split over 100 requests: %v, want about 90 stable and 10 canary", counts)
	}

	// TLS: Envoy presents the Secret's certificate for web.example.com.
	conn, err := tls.Dial("tcp", "127.0.0.1:8443", &tls.Config{ServerName: "web.example.com", InsecureSkipVerify: true}) //nolint:gosec // the certificate is compared below
	if err != nil {
		t.Fatal(err)
	}
	served := conn.ConnectionState().PeerCertificates[0].Raw
	_ = conn.Close()
	block, _ := pem.Decode(cert)
	if block == nil || !bytes.Equal(block.Bytes, served) {
		t.Errorf("Envoy presents another certificate than the Secret web-tls's")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "web.example.com", InsecureSkipVerify: true}} //nolint:gosec // as above
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://127.0.0.1:8443/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Track") != "stable" {
		t.Errorf("through TLS: %s from track %q", resp.Status, resp.Header.Get("X-Track"))
	}
}

// One edit that changes a route and adds the cluster it now names, while a
// load generator sends requests through Envoy: the operator sends the
// cluster and its endpoints before the route (make before break), so no
// request fails. In both of Envoy's protocols.
func TestRealEnvoyChangeUnderLoad(t *testing.T) {
	t.Parallel()
	requirePodNet(t)
	for _, delta := range []bool{false, true} {
		name := map[bool]string{false: "state of the world", true: "delta"}[delta]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, "e2e-real-load-"+map[bool]string{false: "sotw", true: "delta"}[delta])
			port := freePort(t)
			kubectl.Apply(t, ns, backends("a", "b")+fleetYAML("lb", 1))
			kubectl.Apply(t, ns, routeTo("lb", port, "a"))
			k := runEnvoys(t, ns, "lb", delta)
			k.WaitLive(t, 1, 2*time.Minute)
			url := fmt.Sprintf("http://127.0.0.1:%d/", port)
			waitServed(t, url, "a")
			// Make before break is about the order in which the operator
			// sends what it has: a route to a Service whose pods are not
			// ready yet fails in any control plane. So b's pods are ready
			// before the edit.
			waitReadyEndpoints(t, ns, "b", 2)

			l := startLoad(url)
			// One edit: the route names b, and b's cluster is new.
			kubectl.Apply(t, ns, routeTo("lb", port, "b", "a"))
			framework.Eventually(t, 2*time.Minute, "requests served by b", func() (bool, error) {
				return l.seen("b"), nil
			})
			// A little more load on the new configuration, then stop.
			n := l.count()
			framework.Eventually(t, time.Minute, "100 more requests", func() (bool, error) { return l.count() >= n+100, nil })
			failed, total, firstErr := l.stop()
			t.Logf("%s: %d requests during the change, %d failed", name, total, failed)
			if failed != 0 {
				t.Errorf("%d of %d requests failed during the change; the first: %s", failed, total, firstErr)
				if _, proc := only(k.Processes()); proc != nil {
					clusters, err := proc.Get(context.Background(), "/clusters")
					t.Logf("Envoy's /clusters now (%v):\n%s", err, clusters)
				}
			}
		})
	}
}

// A configuration Envoy refuses reaches it: a listener on a port that is
// taken on the proxy's host, which no admission can know of, from a second
// tenant of the fleet. Envoy NACKs; the tenant's EnvoyConfig gives Envoy's
// own message, and its change is withheld; traffic keeps flowing on the
// previous configuration, and the other tenant's next change is served.
func TestRealEnvoyNACK(t *testing.T) {
	t.Parallel()
	requirePodNet(t)
	ns := namespace(t, "e2e-real-nack")
	port := freePort(t)
	kubectl.Apply(t, ns, backends("a", "b")+fleetYAML("lb", 1))
	kubectl.Apply(t, ns, routeTo("lb", port, "a"))
	k := runEnvoys(t, ns, "lb", false)
	k.WaitLive(t, 1, 2*time.Minute)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServed(t, url, "a")
	waitReadyEndpoints(t, ns, "b", 2)

	// A port held by another process of the host, without SO_REUSEPORT.
	taken, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	l := startLoad(url)
	kubectl.Apply(t, ns, fmt.Sprintf(`apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: tenant-a}
spec:
  envoyRef: lb
  resources:
    listeners:
%s`, listenerYAML("taken", takenPort, "lb-routes")))
	framework.Eventually(t, 2*time.Minute, "tenant-a's change withheld, with Envoy's refusal", func() (bool, error) {
		out, err := kubectl.JSONPath(ns, "envoyconfig tenant-a", `{.status.conditions[?(@.type=="Accepted")].reason}|{.status.conditions[?(@.type=="Accepted")].message}`)
		return err == nil && strings.HasPrefix(out, "Withheld|") && strings.Contains(out, "Address already in use"), fmt.Errorf("Accepted: %q (%v)", out, err)
	})
	if _, proc := only(k.Processes()); proc != nil {
		if rejected, err := proc.Stat(context.Background(), "listener_manager.lds.update_rejected"); err != nil || rejected == 0 {
			t.Errorf("Envoy's listener_manager.lds.update_rejected: %d (%v), want at least 1", rejected, err)
		}
	} else {
		t.Error("the fleet's one Envoy is gone")
	}

	// The other tenant's change: served to the Envoy, whose traffic moves to b.
	kubectl.Apply(t, ns, routeTo("lb", port, "b", "a"))
	framework.Eventually(t, 2*time.Minute, "requests served by b", func() (bool, error) { return l.seen("b"), nil })
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoyconfig lb-routes", `{.status.conditions[?(@.type=="Published")].status}/{.status.proxies.acked}`, "True/1")
	if reason, _ := kubectl.JSONPath(ns, "envoyconfig tenant-a", `{.status.conditions[?(@.type=="Accepted")].reason}`); reason != "Withheld" {
		t.Errorf("tenant-a's Accepted reason after lb-routes changed: %q, want Withheld", reason)
	}
	n := l.count()
	framework.Eventually(t, time.Minute, "100 more requests", func() (bool, error) { return l.count() >= n+100, nil })
	failed, total, firstErr := l.stop()
	if failed != 0 {
		t.Errorf("%d of %d requests failed while Envoy refused one tenant's change and took the other's; the first: %s", failed, total, firstErr)
	}
}

// load sends requests, one after another, until stopped, and counts them.
type load struct {
	mu       sync.Mutex
	tracks   map[string]int
	failed   int
	total    atomic.Int64
	firstErr string
	stopped  atomic.Bool
	done     chan struct{}
}

func startLoad(url string) *load {
	l := &load{tracks: map[string]int{}, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		// Bounded in count and time, whatever the test does.
		deadline := time.Now().Add(3 * time.Minute)
		for i := 0; i < 200000 && !l.stopped.Load() && time.Now().Before(deadline); i++ {
			code, track, body, err := get(url)
			l.mu.Lock()
			if err != nil || code != 200 {
				l.failed++
				if l.firstErr == "" {
					l.firstErr = fmt.Sprintf("%d %v %s", code, err, body)
				}
			} else {
				l.tracks[track]++
			}
			l.mu.Unlock()
			l.total.Add(1)
		}
	}()
	return l
}

func (l *load) seen(track string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tracks[track] > 0
}

func (l *load) count() int64 { return l.total.Load() }

func (l *load) stop() (failed int, total int64, firstErr string) {
	l.stopped.Store(true)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed, l.total.Load(), l.firstErr
}

func freePort(t *testing.T) int {
	t.Helper()
	ports, err := realenvoy.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return int(ports[0])
}

// backends are a Deployment and a Service for each track, whose pods answer
// on port 8080 (podnet).
func backends(tracks ...string) string {
	var b strings.Builder
	for _, tr := range tracks {
		fmt.Fprintf(&b, `apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s, track: %[1]s}}
    spec:
      containers:
      - {name: web, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: [netexec, --http-port=8080], ports: [{name: http, containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec:
  selector: {app: %[1]s}
  ports: [{name: http, port: 80, targetPort: http}]
---
`, tr)
	}
	return b.String()
}

func fleetYAML(name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: example.com/v1
kind: Envoy
metadata: {name: %s}
spec: {replicas: %d, drainSeconds: 0}
---
`, name, replicas)
}

func listenerYAML(name string, port int, routes string) string {
	return fmt.Sprintf(`    - name: %s
      address: {socket_address: {address: 0.0.0.0, port_value: %d}}
      filter_chains:
      - filters:
        - name: envoy.filters.network.http_connection_manager
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
            stat_prefix: %s
            rds: {route_config_name: %s, config_source: {ads: {}, resource_api_version: V3}}
            http_filters:
            - name: envoy.filters.http.router
              typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, name, port, name, routes)
}

// routeTo is the EnvoyConfig lb-routes of fleet: a listener on port whose
// route sends everything to the cluster of track, and the clusters of track
// and of also, each the endpoints of the Service of that name.
func routeTo(fleet string, port int, track string, also ...string) string {
	var clusters, endpoints strings.Builder
	for _, c := range append([]string{track}, also...) {
		fmt.Fprintf(&clusters, `    - name: %s
      type: EDS
      connect_timeout: 1s
      eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
`, c)
		fmt.Fprintf(&endpoints, "  - {cluster: %[1]s, service: %[1]s, port: http}\n", c)
	}
	return fmt.Sprintf(`apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: lb-routes}
spec:
  envoyRef: %[1]s
  resources:
    listeners:
%[2]s    routes:
    - name: lb-routes
      virtual_hosts:
      - name: all
        domains: ["*"]
        routes:
        - match: {prefix: /}
          route: {cluster: %[3]s}
    clusters:
%[4]s  serviceEndpoints:
%[5]s`, fleet, listenerYAML("http", port, "lb-routes"), track, clusters.String(), endpoints.String())
}

// A proxy that stops drains first: its preStop hook runs against Envoy's
// admin interface (run here as the kubelet would run it in the container),
// fails its health check, so that a connection kept open is told to close
// with its next response, and Envoy is stopped once no connection is left,
// after at least the hook's minimum of checks. The drain's time is logged
// for docs/benchmarks.md, not asserted.
func TestRealEnvoyDrain(t *testing.T) {
	t.Parallel()
	requirePodNet(t)
	ns := namespace(t, "e2e-real-drain")
	port := freePort(t)
	kubectl.Apply(t, ns, backends("a")+strings.Replace(fleetYAML("lb", 1), "drainSeconds: 0", "drainSeconds: 5", 1))
	kubectl.Apply(t, ns, routeTo("lb", port, "a"))
	k := runEnvoys(t, ns, "lb", false)
	pod, proc := only(k.WaitLive(t, 1, 2*time.Minute))
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServed(t, url, "a")

	// One connection, kept open.
	keep := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1}}
	resp, err := keep.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.Close {
		t.Fatal("Envoy closes the connection before any drain")
	}

	start := time.Now()
	kubectl.Run(t, "-n", ns, "delete", "pod", pod, "--wait=false")
	framework.Eventually(t, time.Minute, "Envoy's health check to fail", func() (bool, error) {
		return !proc.IsReady(context.Background()), nil
	})
	resp, err = keep.Get(url)
	if err != nil {
		t.Fatalf("a request on the open connection while draining: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("draining, a request on the open connection: %s, closing it: %t; want 200 and Connection: close", resp.Status, resp.Close)
	}
	framework.Eventually(t, time.Minute, "Envoy to stop once drained", func() (bool, error) {
		done, _ := proc.Exited()
		return done, nil
	})
	t.Logf("drained and stopped %s after the pod's deletion (drainSeconds 5; the hook checks at least 5 times, a second apart)", time.Since(start).Round(100*time.Millisecond))
}

// The sidecar sample: the webhook injects a native sidecar Envoy into each
// of the Deployment shop's pods, and those Envoys, run from the injected
// container's arguments and the fleet's ConfigMap and Secret, load the
// fleet's EnvoyConfig and ACK it. Its traffic is not proven here: the
// sidecar sends to the application on the pod's own loopback, which the
// host's processes do not have one of each.
func TestRealEnvoySidecarSample(t *testing.T) {
	t.Parallel()
	realenvoy.Require(t)
	ns := namespace(t, "e2e-real-sidecar")
	kubectl.Run(t, "label", "namespace", ns, "kube-envoy-controller.io/injection=enabled")
	kubectl.Run(t, "-n", ns, "apply", "-f", sample("example_v1_envoy_sidecar.yaml"))
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "pods -l app=shop", "{.items[*].spec.initContainers[*].name}", "envoy envoy")
	k := &realenvoy.Kubelet{Client: clientset, Namespace: ns, Selector: "app=shop",
		Envoy: realenvoy.Require(t), XDS: os.Getenv("E2E_XDS_ADDR"), Dir: t.TempDir()}
	t.Cleanup(k.Start(func(err error) { t.Logf("host sidecars: %v", err) }))
	k.WaitLive(t, 2, 2*time.Minute)
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoyconfig shop-routes", "{.status.proxies.acked}", "2")
}
