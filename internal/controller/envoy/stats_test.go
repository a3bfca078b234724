package envoy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/analysis"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/stats"
)

func configRollout() *examplev1.EnvoyConfigRollout {
	return &examplev1.EnvoyConfigRollout{Steps: []examplev1.EnvoyConfigRolloutStep{{Proxies: ptr.To[int32](1)}, {Percent: ptr.To[int32](50)}}}
}

// statsCases are the fleets whose bootstrap declares the stats sink, and
// those whose bootstrap does not.
var statsCases = []struct {
	name   string
	mutate func(*examplev1.Envoy)
	sink   bool
}{
	{"built-in server, rollout", func(e *examplev1.Envoy) { e.Spec.XDS, e.Spec.ConfigRollout = nil, configRollout() }, true},
	{"built-in server, no rollout", func(e *examplev1.Envoy) { e.Spec.XDS = nil }, false},
	{"external xDS server, rollout", func(e *examplev1.Envoy) { e.Spec.ConfigRollout = configRollout() }, false},
	{"external xDS server, no rollout", func(*examplev1.Envoy) {}, false},
}

// A fleet's bootstrap declares the stats sink, over its own xDS cluster,
// when the fleet has the built-in xDS server and spec.configRollout; for
// any other fleet, the bootstrap is what it was. No bootstrap has a stats
// matcher: every stat stays in /stats/prometheus.
func TestBootstrapStatsSink(t *testing.T) {
	for _, tc := range statsCases {
		t.Run(tc.name, func(t *testing.T) {
			e := seedSample()
			tc.mutate(e)
			c := desired(t, e)
			if c.XDS.StatsSink != tc.sink {
				t.Errorf("XDS.StatsSink = %v, want %v", c.XDS.StatsSink, tc.sink)
			}
			b, err := proxy.ParseBootstrap([]byte(c.ConfigMap.Data[proxy.BootstrapKey]))
			if err != nil {
				t.Fatal(err)
			}
			if b.GetStatsConfig().GetStatsMatcher() != nil {
				t.Errorf("a stats matcher: %v", b.GetStatsConfig().GetStatsMatcher())
			}
			if !tc.sink {
				if len(b.GetStatsSinks()) != 0 || b.GetStatsFlushInterval() != nil {
					t.Errorf("stats sinks %v flushed every %v, want none", b.GetStatsSinks(), b.GetStatsFlushInterval())
				}
				// The bootstrap is the one of the same fleet without a sink.
				without := c.XDS
				without.StatsSink = false
				files, err := proxy.RenderFiles(without, fleet.Overload(e))
				if err != nil {
					t.Fatal(err)
				}
				if c.BootstrapHash != proxy.Hash(files[proxy.BootstrapKey]) {
					t.Error("the bootstrap differs from the one without a stats sink")
				}
				return
			}
			if len(b.GetStatsSinks()) != 1 || b.GetStatsSinks()[0].GetName() != proxy.StatsSinkName {
				t.Fatalf("stats sinks %v", b.GetStatsSinks())
			}
			ms := &metricsv3.MetricsServiceConfig{}
			if err := b.GetStatsSinks()[0].GetTypedConfig().UnmarshalTo(ms); err != nil {
				t.Fatal(err)
			}
			if ms.GetGrpcService().GetEnvoyGrpc().GetClusterName() != fleet.XDSClusterName {
				t.Errorf("the sink streams over %q, want the xDS cluster %q", ms.GetGrpcService().GetEnvoyGrpc().GetClusterName(), fleet.XDSClusterName)
			}
			if got := b.GetStatsFlushInterval().AsDuration(); got != proxy.StatsFlushInterval {
				t.Errorf("flushed every %v", got)
			}
			// Turning the rollout off removes the sink, and rolls the pods
			// back to the bootstrap without it.
			e.Spec.ConfigRollout = nil
			if off := desired(t, e); off.BootstrapHash == c.BootstrapHash || off.XDS.StatsSink {
				t.Error("without spec.configRollout, the bootstrap still declares the sink")
			}
		})
	}
}

// Envoy loads the bootstrap of every fleet of statsCases, as the fleet's pod
// runs it (its ConfigMap, its client certificate Secret), in
// `--mode validate`.
func TestRealEnvoyLoadsTheBootstrapWithStatsSink(t *testing.T) {
	bin := realenvoy.Require(t)
	for _, tc := range statsCases {
		t.Run(tc.name, func(t *testing.T) {
			e := seedSample()
			tc.mutate(e)
			c := desired(t, e)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: fleet.Name(e) + "-7d9f8-x2x4k"},
				Spec: *c.Deployment.Spec.Template.Spec.DeepCopy()}
			p, err := realenvoy.FromPod(pod, map[string]*corev1.ConfigMap{c.ConfigMap.Name: c.ConfigMap}, clientCertSecret(t, e))
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			a, err := realenvoy.Adapt(p, realenvoy.Host{Root: root, XDS: "127.0.0.1:18000", AdminPort: 41000, ReadyPort: 41001})
			if err != nil {
				t.Fatal(err)
			}
			if err := realenvoy.Write(a); err != nil {
				t.Fatal(err)
			}
			if err := realenvoy.ValidateArgs(bin, root, a.Args...); err != nil {
				t.Errorf("Envoy refuses the bootstrap: %v", err)
			}
		})
	}
}

// clientCertSecret is e's client certificate Secret, as the operator makes
// it, by name, from a new CA.
func clientCertSecret(t *testing.T, e *examplev1.Envoy) map[string]*corev1.Secret {
	t.Helper()
	return clientCertSecretOf(t, newAuthority(t), e)
}

func newAuthority(t *testing.T) pki.Authority {
	t.Helper()
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// clientCertSecretOf is clientCertSecret, issued by a.
func clientCertSecretOf(t *testing.T, a pki.Authority, e *examplev1.Envoy) map[string]*corev1.Secret {
	t.Helper()
	leaf, err := pki.IssueClient(a, fleet.Of(e), time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	name := fleet.ClientSecretName(e)
	return map[string]*corev1.Secret{name: {ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": a.Bundle()}}}
}

// A real Envoy of a fleet with a rollout, started from its pod as the
// operator renders it (the ConfigMap's bootstrap, the client certificate
// Secret), streams its stats to the receiver on the built-in xDS server's
// port, over the mutual TLS connection of its ADS stream: the requests
// sent through its ready listener to its admin cluster are recorded by its
// node id and fleet, flush after flush. Its /stats/prometheus still shows
// every stat, the drain's server.total_connections among them: the
// bootstrap has no stats matcher.
func TestRealEnvoyOfARolloutFleetReportsToTheXDSServer(t *testing.T) {
	bin := realenvoy.Require(t)
	a := newAuthority(t)
	leaf, err := pki.IssueServer(a, []string{"localhost"}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: a.Pool(), NextProtos: []string{"h2"}}
	srv := server.New("127.0.0.1:0", logr.Discard())
	srv.SetTLS(func(context.Context) (*tls.Config, error) { return cfg.Clone(), nil }, pki.DefaultOptions.TrustDomain)
	r := stats.New(stats.Options{TrustDomain: pki.DefaultOptions.TrustDomain})
	srv.AddService(r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the xDS server: %v", err)
		}
	})
	addr, err := srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}

	d := builtin
	d.XDS.Host = "localhost" // the name the server's certificate has
	e := seedSample()
	e.Spec.XDS, e.Spec.ConfigRollout = nil, configRollout()
	c, err := Desired(e, d)
	if err != nil {
		t.Fatal(err)
	}
	id := fleet.Of(e).String()
	// An empty configuration: the proxy's static ready listener serves
	// once its first one is applied.
	if err := srv.SetFleet(ctx, id, "v1", map[string][]types.Resource{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: fleet.Name(e) + "-7d9f8-x2x4k"},
		Spec: *c.Deployment.Spec.Template.Spec.DeepCopy()}
	p, err := realenvoy.FromPod(pod, map[string]*corev1.ConfigMap{c.ConfigMap.Name: c.ConfigMap}, clientCertSecretOf(t, a, e))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var log realenvoy.Log
	proc, err := realenvoy.Run(bin, p, root, addr.String(), false, &log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("Envoy's log:\n%s", log.String())
		}
	})
	ready := readyURL(t, filepath.Join(root, proxy.BootstrapPath))

	const sent = 5
	testenv.Poll(t, 100*time.Millisecond, testenv.Timeout, "the ready listener to answer LIVE", func() (bool, error) {
		body, err := httpGet(ctx, ready+"/ready")
		return err == nil && strings.TrimSpace(body) == "LIVE", nil
	})
	for range sent - 1 {
		if _, err := httpGet(ctx, ready+"/ready"); err != nil {
			t.Fatal(err)
		}
	}
	var rep stats.Report
	testenv.Poll(t, 200*time.Millisecond, testenv.Timeout, "the receiver to hold the proxy's requests", func() (bool, error) {
		rep, _ = r.Report(id, pod.Name)
		return rep.Scopes[analysis.ScopeHTTP(proxy.ReadyListenerName)].Requests >= sent, nil
	})
	h, admin := rep.Scopes[analysis.ScopeHTTP(proxy.ReadyListenerName)], rep.Scopes[analysis.ScopeCluster("envoy_admin")]
	t.Logf("%s reported %d times: ready listener %d requests, %d 5xx; admin cluster %d requests; %d metrics dropped",
		pod.Name, rep.Reports, h.Requests, h.Errors5xx, admin.Requests, rep.Dropped)
	if h.Errors5xx != 0 || admin.Requests < sent || h.Duration.Count() < sent {
		t.Errorf("ready listener %+v, admin cluster %+v: want the %d requests sent, none 5xx", h, admin, sent)
	}
	if !rep.Connected || rep.Dropped == 0 {
		t.Errorf("connected %v, %d metrics dropped: want a stream open, and the stats off the inclusion list dropped", rep.Connected, rep.Dropped)
	}
	prom, err := httpGet(ctx, ready+"/stats/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"envoy_server_total_connections", "envoy_cluster_upstream_cx_total", "envoy_http_downstream_rq_total", "envoy_server_memory_allocated"} {
		if !strings.Contains(prom, want) {
			t.Errorf("/stats/prometheus lacks %s", want)
		}
	}
}

// readyURL is the base URL of the ready listener of the bootstrap at path.
func readyURL(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proxy.ParseBootstrap(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() == proxy.ReadyListenerName {
			return fmt.Sprintf("http://127.0.0.1:%d", l.GetAddress().GetSocketAddress().GetPortValue())
		}
	}
	t.Fatalf("no listener %s in %s", proxy.ReadyListenerName, path)
	return ""
}

func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}
