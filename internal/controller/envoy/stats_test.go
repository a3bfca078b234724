package envoy

import (
	"testing"
	"time"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
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
// it, by name.
func clientCertSecret(t *testing.T, e *examplev1.Envoy) map[string]*corev1.Secret {
	t.Helper()
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.IssueClient(a, fleet.Of(e), time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	name := fleet.ClientSecretName(e)
	return map[string]*corev1.Secret{name: {ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": a.Bundle()}}}
}
