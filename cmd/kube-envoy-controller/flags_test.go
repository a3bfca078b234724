package main

import (
	"encoding/json"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/certificates"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// parsed is what a command line comes to: the settings the binary acts on,
// with the client's rate limit as configureClient sets it.
type parsed struct {
	Controllers []string
	BuiltinXDS  proxy.XDSServer
	XDSBind     string
	XDSLimits   server.Limits
	QPS         float32
	Burst       int
	Manager     manager.Options
	Webhook     *webhook.Options
	XDSCA       *authority.Config
	Policy      translate.Policy
	Envoy       envoyjudge.Options
}

func parse(args []string) (parsed, error) {
	fs := flag.NewFlagSet("kube-envoy-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s, err := parseFlags(fs, args)
	if err != nil {
		return parsed{}, err
	}
	cfg := &rest.Config{}
	configureClient(cfg, s.qps, s.burst)
	return parsed{s.controllers, s.builtinXDS, s.xdsBindAddress, s.xdsLimits, cfg.QPS, cfg.Burst, s.manager, s.webhook, s.xdsCA, s.policy, s.envoy}, nil
}

// The defaults of the flag table in docs/reference/flags.md.
func defaults() parsed {
	return parsed{
		Controllers: []string{"*"},
		BuiltinXDS:  proxy.XDSServer{ClusterName: "xds_cluster", Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000, MutualTLS: true},
		XDSBind:     ":18000",
		XDSCA: &authority.Config{
			Namespace: "kube-envoy-controller", SecretName: "kube-envoy-controller-xds-ca",
			Options: pki.Options{TrustDomain: "cluster.local", CAValidity: 365 * 24 * time.Hour, CertValidity: 24 * time.Hour, Propagation: time.Hour},
			Hosts:   []string{"kube-envoy-controller-xds.kube-envoy-controller.svc", "localhost", "127.0.0.1"},
		},
		XDSLimits: server.DefaultLimits,
		QPS:       -1, // no client-side limit
		Manager: manager.Options{
			MetricsAddr: ":8443", MetricsSecure: true, ProbeAddr: ":8081", PprofAddr: "0", ConcurrentReconciles: 5,
			LeaderElection: manager.LeaderElection{LeaseDuration: 12 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second},
		},
		Policy: translate.Policy{Namespace: "kube-envoy-controller", Hosts: []string{
			"kube-envoy-controller-xds.kube-envoy-controller.svc", "kube-envoy-controller-webhook.kube-envoy-controller.svc"}},
		Envoy: envoyjudge.Options{Envoy: "envoy", Concurrency: 2, Timeout: 3 * time.Second},
	}
}

// The webhook's settings with --webhook-bind-address alone.
func webhookDefaults() *webhook.Options {
	return &webhook.Options{Namespace: "kube-envoy-controller", Certs: &certificates.Options{
		Dir:                     "/tmp/k8s-webhook-server/serving-certs",
		SecretName:              "kube-envoy-controller-webhook-cert",
		DNSName:                 "kube-envoy-controller-webhook.kube-envoy-controller.svc",
		WebhookConfiguration:    "kube-envoy-controller-injector",
		ValidatingConfiguration: "kube-envoy-controller-validator",
	}}
}

func TestFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	withWebhook := func(p *parsed, host string, port int) {
		p.Manager.WebhookHost, p.Manager.WebhookPort = host, port
		p.Manager.WebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"
		p.Webhook = webhookDefaults()
	}
	tests := []struct {
		name string
		args string
		want func(*parsed) // changes from defaults()
	}{
		{"defaults", "", func(*parsed) {}},
		{"controllers", "--controllers=*,-foo", func(p *parsed) { p.Controllers = []string{"*", "-foo"} }},
		{"one controller", "--controllers podset", func(p *parsed) { p.Controllers = []string{"podset"} }},
		{"xds service address", "--xds-service-address=xds.example:19000", func(p *parsed) {
			p.BuiltinXDS.Host, p.BuiltinXDS.Port = "xds.example", 19000
			p.XDSCA.Hosts[0] = "xds.example"
			p.Policy.Hosts[0] = "xds.example"
		}},
		{"xds plaintext", "--xds-plaintext", func(p *parsed) { p.BuiltinXDS.MutualTLS, p.XDSCA = false, nil }},
		{"xds CA kept by cert-manager", "--xds-ca-rotation=false", func(p *parsed) { p.XDSCA.External = true }},
		{"xds certificates", "--xds-trust-domain=corp.example --xds-ca-secret=ca --xds-ca-validity=720h --xds-certificate-validity=1h --xds-ca-propagation=10m --namespace=ops", func(p *parsed) {
			p.XDSCA.Namespace, p.XDSCA.SecretName = "ops", "ca"
			p.XDSCA.Options = pki.Options{TrustDomain: "corp.example", CAValidity: 720 * time.Hour, CertValidity: time.Hour, Propagation: 10 * time.Minute}
			p.Policy.Namespace, p.Policy.Hosts[1] = "ops", "kube-envoy-controller-webhook.ops.svc"
		}},
		{"xds bind address", "--xds-bind-address=127.0.0.1:18001", func(p *parsed) { p.XDSBind = "127.0.0.1:18001" }},
		{"xds limits", "--xds-max-connections=500 --xds-max-streams-per-connection=4", func(p *parsed) {
			p.XDSLimits.MaxConnections, p.XDSLimits.MaxStreamsPerConnection = 500, 4
		}},
		{"xds client limits", "--xds-handshake-timeout=2s --xds-max-connections-per-source=50 --xds-max-handshakes-per-source=10 --xds-max-request-bytes=65536 --xds-max-names-per-type=500", func(p *parsed) {
			l := &p.XDSLimits
			l.HandshakeTimeout, l.MaxConnectionsPerSource, l.HandshakesPerSecondPerSource, l.MaxRequestBytes, l.MaxNamesPerType = 2*time.Second, 50, 10, 65536, 500
			// A fleet's resources of each kind stay below the names per type.
			p.Policy.Bounds = translate.Bounds{"fleet.listeners": {Max: 499}, "fleet.routes": {Max: 499}, "fleet.clusters": {Max: 499}, "fleet.endpoints": {Max: 499}, "fleet.secrets": {Max: 499}}
		}},
		{"qps: burst at least twice", "--kube-api-qps=20", func(p *parsed) { p.QPS, p.Burst = 20, 40 }},
		{"qps and burst", "--kube-api-qps=20 --kube-api-burst=100", func(p *parsed) { p.QPS, p.Burst = 20, 100 }},
		{"burst below twice qps", "--kube-api-qps=20 --kube-api-burst=5", func(p *parsed) { p.QPS, p.Burst = 20, 40 }},
		{"qps 0: no limit", "--kube-api-qps=0 --kube-api-burst=50", func(*parsed) {}},
		{"servers", "--metrics-bind-address=0 --health-probe-bind-address=:9081 --pprof-bind-address=:6060", func(p *parsed) {
			p.Manager.MetricsAddr, p.Manager.ProbeAddr, p.Manager.PprofAddr = "0", ":9081", ":6060"
		}},
		{"plain metrics", "--metrics-bind-address=127.0.0.1:8080 --metrics-secure=false", func(p *parsed) {
			p.Manager.MetricsAddr, p.Manager.MetricsSecure = "127.0.0.1:8080", false
		}},
		{"leader election", "--leader-elect --leader-election-namespace=ops", func(p *parsed) {
			p.Manager.LeaderElect, p.Manager.LeaderElectionNamespace = true, "ops"
		}},
		{"leader election times", "--leader-elect-lease-duration=30s --leader-elect-renew-deadline=20s --leader-elect-retry-period=5s", func(p *parsed) {
			p.Manager.LeaderElection = manager.LeaderElection{LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 5 * time.Second}
		}},
		{"concurrent reconciles", "--concurrent-reconciles=12", func(p *parsed) { p.Manager.ConcurrentReconciles = 12 }},
		{"webhook", "--webhook-bind-address=:9443", func(p *parsed) { withWebhook(p, "", 9443) }},
		{"webhook on the host", "--webhook-bind-address=127.0.0.1:9443 --webhook-cert-dns-name=localhost --webhook-cert-write-files --webhook-cert-dir=/run/certs --namespace=ops",
			func(p *parsed) {
				withWebhook(p, "127.0.0.1", 9443)
				p.Manager.WebhookCertDir = "/run/certs"
				p.Webhook.Namespace = "ops"
				p.XDSCA.Namespace = "ops"
				p.Webhook.Certs.Dir, p.Webhook.Certs.DNSName, p.Webhook.Certs.WriteFiles = "/run/certs", "localhost", true
				// localhost, the proxies' own loopback, is not the operator's name for them.
				p.Policy.Namespace, p.Policy.Hosts = "ops", p.Policy.Hosts[:1]
			}},
		{"webhook namespace names the certificate", "--webhook-bind-address=:9443 --namespace=ops", func(p *parsed) {
			withWebhook(p, "", 9443)
			p.Webhook.Namespace, p.Webhook.Certs.DNSName = "ops", "kube-envoy-controller-webhook.ops.svc"
			p.XDSCA.Namespace = "ops"
			p.Policy.Namespace, p.Policy.Hosts[1] = "ops", "kube-envoy-controller-webhook.ops.svc"
		}},
		{"content policy", "--envoyconfig-allowed-files=/etc/pages/,/etc/ca.pem, --envoyconfig-allowed-env=GREETING", func(p *parsed) {
			p.Policy.Files, p.Policy.Env = []string{"/etc/pages/", "/etc/ca.pem"}, []string{"GREETING"}
		}},
		{"bounds", "--envoyconfig-bounds=envoy.config.core.v3.HealthCheck.interval=5s:,envoy.config.listener.v3.Listener.ignore_global_conn_limit=false:true,fleet.clusters=:9999", func(p *parsed) {
			p.Policy.Bounds = translate.Bounds{
				"envoy.config.core.v3.HealthCheck.interval":                  {Min: int64(5 * time.Second), Max: int64(time.Hour)},
				"envoy.config.listener.v3.Listener.ignore_global_conn_limit": {Min: 0, Max: 1},
				"fleet.clusters": {Min: 0, Max: 9999},
			}
		}},
		{"webhook without rotation", "--webhook-bind-address=:9443 --webhook-cert-rotation=false", func(p *parsed) {
			withWebhook(p, "", 9443)
			p.Webhook.Certs = nil
		}},
		{"webhook disabled ignores its other flags", "--webhook-bind-address=0 --webhook-cert-rotation=false", func(*parsed) {}},
		{"envoy", "--envoy-path=/usr/local/bin/envoy --envoy-validation-concurrency=4 --envoy-validation-timeout=1500ms", func(p *parsed) {
			p.Envoy = envoyjudge.Options{Envoy: "/usr/local/bin/envoy", Concurrency: 4, Timeout: 1500 * time.Millisecond}
		}},
		{"kubeconfig and logging", "--kubeconfig=/dev/null --zap-log-level=debug --zap-devel", func(*parsed) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(strings.Fields(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			want := defaults()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n got %s\nwant %s", tt.args, show(got), show(want))
			}
		})
	}
}

// show renders p as JSON, pointers followed, for a readable failure.
func show(p parsed) string {
	b, err := json.Marshal(p)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestFlagErrors(t *testing.T) {
	tests := []struct{ args, want string }{
		{"--controllers=nosuch", `--controllers: unknown controller "nosuch"`},
		{"--controllers=*,-nosuch", `unknown controller "-nosuch"`},
		{"--controllers=", "--controllers: empty"},
		{"--xds-service-address=xds", "--xds-service-address"},
		{"--xds-service-address=:18000", "want host:port"},
		{"--xds-service-address=xds:0", "want host:port"},
		{"--xds-service-address=xds:65536", "want host:port"},
		{"--webhook-bind-address=9443", "--webhook-bind-address"},
		{"--webhook-bind-address=:0", "--webhook-bind-address"},
		{"--concurrent-reconciles=0", "--concurrent-reconciles 0: want at least 1"},
		{"--xds-max-connections=0", "--xds-max-connections 0: want at least 1"},
		{"--xds-max-streams-per-connection=-1", "--xds-max-streams-per-connection -1: want at least 1"},
		{"--xds-max-streams-per-connection=4294967296", "at most 4294967295"},
		{"--xds-max-connections=many", "invalid value"},
		{"--xds-handshake-timeout=0s", "--xds-handshake-timeout 0s: want a positive duration"},
		{"--xds-max-connections-per-source=0", "--xds-max-connections-per-source 0: want at least 1"},
		{"--xds-max-handshakes-per-source=0", "--xds-max-handshakes-per-source 0: want at least 1"},
		{"--xds-max-request-bytes=100", "--xds-max-request-bytes 100: want at least 1024"},
		{"--xds-max-names-per-type=0", "--xds-max-names-per-type 0: want at least 1"},
		{"--kube-api-qps=fast", "invalid value"},
		{"--leader-elect=maybe", "invalid boolean value"},
		{"--leader-elect-lease-duration=12", "invalid value"},
		{"--no-such-flag", "flag provided but not defined"},
		{"--xds-trust-domain=Corp_Example", "trust domain"},
		{"--xds-certificate-validity=1s", "certificate validity"},
		{"--xds-ca-validity=2h --xds-certificate-validity=1h", "CA validity"},
		{"--leader-elect extra", "unexpected arguments"},
		{"--envoyconfig-allowed-files=/etc/envoy/", "holds the fleet's xDS client certificate"},
		{"--envoyconfig-allowed-files=/etc/pages/,/etc/envoy/envoy.yaml", "from which the proxy loads its own configuration"},
		{"--envoyconfig-allowed-files=/proc/self/root/", "below /proc"},
		{"--envoyconfig-allowed-files=etc/pages/", "not an absolute, clean path"},
		{"--envoyconfig-allowed-env=A=B", "not an environment variable's name"},
		{"--envoyconfig-bounds=envoy.config.core.v3.HealthCheck.interval", "is not <field>=<min>:<max>"},
		{"--envoyconfig-bounds=envoy.config.core.v3.HealthCheck.name=1:2", "is no bounded field"},
		{"--envoyconfig-bounds=envoy.config.core.v3.HealthCheck.interval=10:20", `"10" is not a duration`},
		{"--envoyconfig-bounds=envoy.config.core.v3.HealthCheck.interval=1h:1s", "the floor 1h0m0s is above the ceiling 1s"},
		{"--envoyconfig-bounds=envoy.config.listener.v3.Listener.ignore_global_conn_limit=false:yes", `"yes" is not true or false`},
		{"--envoyconfig-bounds=fleet.clusters=:10000", "fewer than the xDS server's 10000 names per type"},
		{"--envoyconfig-bounds=fleet.clusters=:500 --xds-max-names-per-type=500", "fewer than the xDS server's 500 names per type"},
		{"--envoyconfig-bounds=fleet.clusters=:499 --xds-max-names-per-type=10", "fewer than the xDS server's 10 names per type"},
		{"--envoy-path=", "--envoy-path: empty"},
		{"--envoy-validation-concurrency=0", "--envoy-validation-concurrency 0: want at least 1"},
		{"--envoy-validation-timeout=0s", "--envoy-validation-timeout 0s: want a positive duration"},
		{"--envoy-validation-timeout=6s", "at most 5s (the validating webhook's own timeout)"},
	}
	for _, tt := range tests {
		if _, err := parse(strings.Fields(tt.args)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
}

// --version asks for the version alone: the other flags are not checked.
func TestVersionFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version", "--controllers=nosuch"}, true},
		{nil, false},
	} {
		fs := flag.NewFlagSet("kube-envoy-controller", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if s, err := parseFlags(fs, tt.args); err != nil || s.showVersion != tt.want {
			t.Errorf("%q: got %+v, %v; want showVersion %v", tt.args, s, err, tt.want)
		}
	}
}
