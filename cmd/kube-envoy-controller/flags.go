package main

import (
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// settings is what the command line asks for, checked.
type settings struct {
	// controllers is the --controllers selection (controller.ParseSelection).
	controllers []string
	// builtinXDS is where fleets without spec.xds reach the operator's xDS server.
	builtinXDS     proxy.XDSServer
	xdsBindAddress string
	// debugBindAddress is the xDS debug endpoint's; "0" disables it.
	debugBindAddress string
	xdsLimits        server.Limits
	// xdsCA is where the xDS CA lives and how it issues; nil in plaintext.
	xdsCA *authority.Config
	// qps and burst are the client-side rate limit (see configureClient).
	qps   float32
	burst int
	// manager holds the manager's options, the webhook server's included.
	manager manager.Options
	// webhook is nil when the webhook is disabled.
	webhook *webhook.Options
	zap     zap.Options
	// namespace is the operator's own namespace (--namespace).
	namespace string
	// replica names this replica in the reports of its xDS proxies.
	replica string
	// policy is the content policy of EnvoyConfigs, for the validating
	// webhook and the EnvoyConfig controller.
	policy translate.Policy
	// showVersion asks for the version alone: the other flags are not checked.
	showVersion bool
}

// parseFlags registers the binary's flags on fs, parses args and checks them.
func parseFlags(fs *flag.FlagSet, args []string) (*settings, error) {
	var (
		s                    settings
		controllers          string
		xdsServiceAddress    string
		qps                  float64
		concurrentReconciles int
		xdsPlaintext         bool
		xdsCASecret          string
		xdsCARotation        bool
		pkiOpts              = pki.DefaultOptions
		allowedFiles         string
		allowedEnv           string
	)
	config.RegisterFlags(fs) // --kubeconfig
	fs.StringVar(&controllers, "controllers", "*", fmt.Sprintf(
		"Comma-separated controllers to run: '*' runs all, 'name' enables one, '-name' disables one. Known: %s.",
		strings.Join(controller.Names(), ", ")))
	fs.StringVar(&s.manager.MetricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&s.manager.MetricsSecure, "metrics-secure", true,
		"Serve /metrics over HTTPS to scrapers whose token may GET /metrics (the API server reviews it); false serves plain HTTP to anyone.")
	fs.StringVar(&s.manager.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	fs.StringVar(&s.manager.PprofAddr, "pprof-bind-address", "0", "Address of Go's /debug/pprof endpoints (profiles, and the heap after a forced GC for the benchmarks); 0 disables them.")
	fs.BoolVar(&s.manager.LeaderElect, "leader-elect", false, "Elect a leader, so that only one replica runs the controllers.")
	fs.StringVar(&s.manager.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the pod's namespace in a cluster.")
	le := &s.manager.LeaderElection
	*le = manager.DefaultLeaderElection
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration,
		"How long a standby replica waits, after it last saw the leader renew the Lease, before it takes over.")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline,
		"How long the leader keeps trying to renew the Lease before it stops leading; less than the lease duration.")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "How often the leader renews the Lease and standbys try to take it.")
	fs.Float64Var(&qps, "kube-api-qps", -1, "Client-side QPS limit towards the API server; 0 or less means none (the server's priority and fairness applies).")
	fs.IntVar(&s.burst, "kube-api-burst", 0, "Client-side burst towards the API server, with a positive --kube-api-qps (at least twice the QPS).")
	fs.StringVar(&xdsServiceAddress, "xds-service-address", "kube-envoy-controller-xds.kube-envoy-controller.svc:18000",
		"host:port at which Envoy fleets without spec.xds reach the operator's built-in xDS server: the address of the Service in front of the operator.")
	hookFlags := webhook.BindFlags(fs)
	fs.IntVar(&concurrentReconciles, "concurrent-reconciles", manager.DefaultConcurrentReconciles,
		"How many objects each controller reconciles at once (PodSet sets its own).")
	fs.StringVar(&s.xdsBindAddress, "xds-bind-address", ":18000", "Address of the built-in xDS (ADS) server, served by every replica.")
	fs.StringVar(&s.debugBindAddress, "debug-bind-address", fmt.Sprintf("127.0.0.1:%d", debug.DefaultPort),
		"Address of the xDS debug endpoint that kubectl envoy reads (HTTPS; the API server authenticates and authorizes its clients), served by every replica. "+
			"On loopback by default: clients reach it through the API server's port forwarding. 0 disables it.")
	fs.IntVar(&s.xdsLimits.MaxConnections, "xds-max-connections", server.DefaultLimits.MaxConnections,
		"Connections the xDS server holds at once, on each replica; one more is closed at once, and its client retries.")
	fs.IntVar(&s.xdsLimits.MaxStreamsPerConnection, "xds-max-streams-per-connection", server.DefaultLimits.MaxStreamsPerConnection,
		"Concurrent streams of one xDS connection (Envoy opens one ADS stream per connection).")
	fs.DurationVar(&s.xdsLimits.HandshakeTimeout, "xds-handshake-timeout", server.DefaultLimits.HandshakeTimeout,
		"How long an xDS connection may take to set up (TLS handshake, HTTP/2's first frames); it counts against --xds-max-connections only once set up.")
	fs.IntVar(&s.xdsLimits.MaxConnectionsPerSource, "xds-max-connections-per-source", server.DefaultLimits.MaxConnectionsPerSource,
		"xDS connections one remote IP address may hold at once, set up or not, on each replica.")
	fs.IntVar(&s.xdsLimits.HandshakesPerSecondPerSource, "xds-max-handshakes-per-source", server.DefaultLimits.HandshakesPerSecondPerSource,
		"xDS connections one remote IP address may open per second (as many at once), on each replica.")
	fs.IntVar(&s.xdsLimits.MaxRequestBytes, "xds-max-request-bytes", server.DefaultLimits.MaxRequestBytes,
		"Largest xDS request a stream may send; a larger one ends the stream (ResourceExhausted).")
	fs.IntVar(&s.xdsLimits.MaxNamesPerType, "xds-max-names-per-type", server.DefaultLimits.MaxNamesPerType,
		"Resource names one xDS stream may subscribe to, per type (a delta stream's added up over its requests); more end the stream (ResourceExhausted).")
	fs.BoolVar(&xdsPlaintext, "xds-plaintext", false,
		"Serve xDS in plaintext, without authentication: anyone who reaches the port can read any fleet's configuration and secrets. Only for local experiments; by default xDS is served over mutual TLS only.")
	fs.StringVar(&pkiOpts.TrustDomain, "xds-trust-domain", pkiOpts.TrustDomain,
		"SPIFFE trust domain of the fleets' client certificates: spiffe://<trust domain>/ns/<namespace>/envoy/<name>.")
	fs.StringVar(&xdsCASecret, "xds-ca-secret", authority.DefaultSecretName,
		"Secret, in the operator's namespace, that holds the xDS certificate authority. The leader makes and rotates it.")
	fs.BoolVar(&xdsCARotation, "xds-ca-rotation", true,
		"Make and rotate the xDS CA in --xds-ca-secret. false: the Secret is kept by someone else, such as cert-manager (tls.crt and tls.key of a CA).")
	fs.DurationVar(&pkiOpts.CAValidity, "xds-ca-validity", pkiOpts.CAValidity,
		"Lifetime of an xDS CA; a new one is made when a third of it is left.")
	fs.DurationVar(&pkiOpts.CertValidity, "xds-certificate-validity", pkiOpts.CertValidity,
		"Lifetime of the xDS server's and the fleets' certificates; they are renewed when a third of it is left.")
	fs.DurationVar(&pkiOpts.Propagation, "xds-ca-propagation", pkiOpts.Propagation,
		"How long a new xDS CA is only trusted before it signs: time for every proxy's Secret to bring it.")
	fs.StringVar(&allowedFiles, strings.TrimPrefix(translate.FilesFlag, "--"), "",
		"Comma-separated absolute paths of the proxies' file system that EnvoyConfigs may name, to read or to write (DataSources, access logs, sockets); "+
			"a directory ends in /. None by default: an EnvoyConfig names a file to read what only the proxy's pod may (its ServiceAccount token, its xDS client certificate, which no entry may allow). "+
			"Configuration is never loaded from a file, and no entry may cover the proxy's own configuration in /etc/envoy/.")
	fs.StringVar(&allowedEnv, strings.TrimPrefix(translate.EnvFlag, "--"), "",
		"Comma-separated environment variables of the proxies that EnvoyConfigs may name: in DataSources, tracing custom tags and %ENVIRONMENT(NAME)% in format strings. None by default.")
	fs.StringVar(&s.replica, "replica-name", defaultReplicaName(),
		"Name of this replica in the reports of its xDS proxies, unique among the replicas; defaults to $POD_NAME, else the host name.")
	fs.BoolVar(&s.showVersion, "version", false, "Print the version and exit.")
	s.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if s.showVersion {
		return &s, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	var err error
	s.namespace = hookFlags.Namespace
	if s.replica == "" {
		return nil, fmt.Errorf("--replica-name: empty")
	}
	if s.controllers, err = controller.ParseSelection(controllers); err != nil {
		return nil, err
	}
	if s.builtinXDS, err = parseXDSAddress(xdsServiceAddress); err != nil {
		return nil, err
	}
	if !xdsPlaintext {
		if err := pkiOpts.Check(); err != nil {
			return nil, fmt.Errorf("xDS certificates: %w", err)
		}
		s.builtinXDS.MutualTLS = true
		s.xdsCA = &authority.Config{
			Namespace: hookFlags.Namespace, SecretName: xdsCASecret, Options: pkiOpts, External: !xdsCARotation,
			// The Service's name for proxies in the cluster; localhost for
			// an operator on the host, and for clients beside it.
			Hosts: []string{s.builtinXDS.Host, "localhost", "127.0.0.1"},
		}
	}
	if concurrentReconciles < 1 {
		return nil, fmt.Errorf("--concurrent-reconciles %d: want at least 1", concurrentReconciles)
	}
	s.manager.ConcurrentReconciles = concurrentReconciles
	if s.xdsLimits.MaxConnections < 1 {
		return nil, fmt.Errorf("--xds-max-connections %d: want at least 1", s.xdsLimits.MaxConnections)
	}
	if s.xdsLimits.MaxStreamsPerConnection < 1 || s.xdsLimits.MaxStreamsPerConnection > math.MaxUint32 {
		return nil, fmt.Errorf("--xds-max-streams-per-connection %d: want at least 1, at most %d", s.xdsLimits.MaxStreamsPerConnection, uint32(math.MaxUint32))
	}
	if s.xdsLimits.HandshakeTimeout <= 0 {
		return nil, fmt.Errorf("--xds-handshake-timeout %s: want a positive duration", s.xdsLimits.HandshakeTimeout)
	}
	for _, f := range []struct {
		name       string
		value, min int
	}{
		{"xds-max-connections-per-source", s.xdsLimits.MaxConnectionsPerSource, 1},
		{"xds-max-handshakes-per-source", s.xdsLimits.HandshakesPerSecondPerSource, 1},
		{"xds-max-request-bytes", s.xdsLimits.MaxRequestBytes, 1024},
		{"xds-max-names-per-type", s.xdsLimits.MaxNamesPerType, 1},
	} {
		if f.value < f.min {
			return nil, fmt.Errorf("--%s %d: want at least %d", f.name, f.value, f.min)
		}
	}
	s.qps = float32(qps)
	s.policy = translate.Policy{Files: splitList(allowedFiles), Env: splitList(allowedEnv), Namespace: hookFlags.Namespace}
	// The operator's other names, beside its namespace's: where fleets
	// reach its xDS Service, and where the API server reaches its webhook
	// (on the host, in development, loopback: the proxies' own).
	for _, h := range []string{s.builtinXDS.Host, hookFlags.WebhookDNSName()} {
		if !isLoopback(h) {
			s.policy.Hosts = append(s.policy.Hosts, h)
		}
	}
	if err := s.policy.Check(); err != nil {
		return nil, err
	}
	if hookFlags.Enabled() {
		if s.manager.WebhookHost, s.manager.WebhookPort, err = hookFlags.Server(); err != nil {
			return nil, err
		}
		s.manager.WebhookCertDir = hookFlags.CertDir
		o := hookFlags.Options()
		s.webhook = &o
	}
	return &s, nil
}

// splitList splits a comma-separated flag value, without empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// isLoopback reports whether host names the loopback interface.
func isLoopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

// defaultReplicaName is $POD_NAME, or else the host's name.
func defaultReplicaName() string {
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return pod
	}
	host, _ := os.Hostname()
	return host
}
