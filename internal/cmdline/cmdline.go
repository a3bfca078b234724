// Package cmdline defines the command line of kube-envoy-controller: the
// flags it registers on a FlagSet and the values they hold, unchecked. The
// binary parses and checks them (cmd/kube-envoy-controller); hack/refdocs
// writes the flag reference, docs/reference/flags.md, from the same FlagSet,
// so the usage strings are both what --help prints and what the page says.
package cmdline

import (
	"flag"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// Values are what the flags hold once parsed, as given.
type Values struct {
	Controllers string
	// Manager holds the metrics, probe, pprof and leader election flags.
	Manager              manager.Options
	QPS                  float64
	Burst                int
	XDSServiceAddress    string
	Webhook              *webhook.Flags
	ConcurrentReconciles int
	XDSBindAddress       string
	DebugBindAddress     string
	XDSLimits            server.Limits
	XDSPlaintext         bool
	XDSCASecret          string
	XDSCARotation        bool
	PKI                  pki.Options
	AllowedFiles         string
	AllowedEnv           string
	Bounds               string
	Replica              string
	ShowVersion          bool
	Zap                  zap.Options

	// Envoy holds --envoy-path, --envoy-validation-concurrency and
	// --envoy-validation-timeout.
	Envoy envoyjudge.Options
}

// KubeconfigUsage replaces controller-runtime's usage string of --kubeconfig,
// which does not say where the configuration comes from without it.
const KubeconfigUsage = "Path to the kubeconfig of the cluster to manage. Without it: $KUBECONFIG, else the in-cluster configuration, else ~/.kube/config."

// Register registers the binary's flags on fs and returns where they are
// stored. replica is the default of --replica-name; the default of
// --namespace is $POD_NAMESPACE's (webhook.BindFlags).
func Register(fs *flag.FlagSet, replica string) *Values {
	v := &Values{PKI: pki.DefaultOptions}
	config.RegisterFlags(fs) // --kubeconfig
	if f := fs.Lookup(config.KubeconfigFlagName); f != nil {
		f.Usage = KubeconfigUsage
	}
	fs.StringVar(&v.Controllers, "controllers", "*", fmt.Sprintf(
		"Comma-separated controllers to run, as kube-controller-manager's --controllers: '*' runs all, 'name' enables one, '-name' disables one ('*,-name' runs all but one). Known: %s.",
		strings.Join(controller.Names(), ", ")))
	fs.StringVar(&v.Manager.MetricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&v.Manager.MetricsSecure, "metrics-secure", true,
		"Serve /metrics over HTTPS, with a self-signed certificate, to scrapers whose token may GET /metrics (the API server reviews each token); false serves plain HTTP to anyone.")
	fs.StringVar(&v.Manager.ProbeAddr, "health-probe-bind-address", ":8081",
		"Address of the /healthz and /readyz endpoints: ready once the informers have synced and the xDS and webhook servers listen; both fail when the xDS server can no longer publish. 0 disables them.")
	fs.StringVar(&v.Manager.PprofAddr, "pprof-bind-address", "0", "Address of Go's /debug/pprof endpoints (profiles, and the heap after a forced GC for the benchmarks); 0 disables them.")
	fs.BoolVar(&v.Manager.LeaderElect, "leader-elect", false,
		"Elect a leader among the replicas, with the Lease "+manager.LeaderElectionID+", so that only one replica runs the controllers. true in config/default.")
	fs.StringVar(&v.Manager.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the pod's namespace in a cluster.")
	le := &v.Manager.LeaderElection
	*le = manager.DefaultLeaderElection
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration,
		"How long a standby replica waits, after it last saw the leader renew the Lease, before it takes over. "+
			"With the default durations a standby takes over from a crashed leader within about 17s, and from a stopped one (which gives the Lease up) within a retry period.")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline,
		"How long the leader keeps trying to renew the Lease before it stops leading; less than the lease duration.")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "How often the leader renews the Lease and standbys try to take it.")
	fs.Float64Var(&v.QPS, "kube-api-qps", -1, "Client-side QPS limit towards the API server; 0 or less means none (the server's priority and fairness applies).")
	fs.IntVar(&v.Burst, "kube-api-burst", 0, "Client-side burst towards the API server, with a positive --kube-api-qps (at least twice the QPS).")
	fs.StringVar(&v.XDSServiceAddress, "xds-service-address", "kube-envoy-controller-xds.kube-envoy-controller.svc:18000",
		"host:port at which Envoy fleets without spec.xds reach the operator's built-in xDS server: the address of the Service in front of the operator's xDS port.")
	v.Webhook = webhook.BindFlags(fs)
	fs.IntVar(&v.ConcurrentReconciles, "concurrent-reconciles", manager.DefaultConcurrentReconciles,
		"How many objects each controller reconciles at once, as kube-controller-manager's Deployment workers (PodSet sets its own).")
	fs.StringVar(&v.XDSBindAddress, "xds-bind-address", ":18000", "Address of the built-in xDS server (ADS, state of the world and delta), served by every replica.")
	fs.StringVar(&v.DebugBindAddress, "debug-bind-address", fmt.Sprintf("127.0.0.1:%d", debug.DefaultPort),
		"Address of the xDS debug endpoint that kubectl envoy reads (HTTPS; the API server authenticates and authorizes its clients), served by every replica. "+
			"On loopback by default: clients reach it through the API server's port forwarding. 0 disables it; it is off with --xds-plaintext, since its certificate comes from the xDS CA.")
	fs.IntVar(&v.XDSLimits.MaxConnections, "xds-max-connections", server.DefaultLimits.MaxConnections,
		"Connections the xDS server holds at once, on each replica, counted once set up (their TLS handshake done); "+
			`one more is closed then (kube_envoy_controller_xds_refused_total{reason="connection_limit"}), and its client retries.`)
	fs.IntVar(&v.XDSLimits.MaxStreamsPerConnection, "xds-max-streams-per-connection", server.DefaultLimits.MaxStreamsPerConnection,
		"Concurrent streams of one xDS connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); Envoy opens one ADS stream per connection.")
	fs.DurationVar(&v.XDSLimits.HandshakeTimeout, "xds-handshake-timeout", server.DefaultLimits.HandshakeTimeout,
		"How long an xDS connection may take to set up (TLS handshake, HTTP/2's first frames); it counts against --xds-max-connections only once set up. "+
			`One that takes longer is closed (reason="handshake", as is a failed handshake).`)
	fs.IntVar(&v.XDSLimits.MaxConnectionsPerSource, "xds-max-connections-per-source", server.DefaultLimits.MaxConnectionsPerSource,
		`xDS connections one remote IP address may hold at once, set up or not, on each replica; one more is closed as soon as it is accepted (reason="source_connections").`)
	fs.IntVar(&v.XDSLimits.HandshakesPerSecondPerSource, "xds-max-handshakes-per-source", server.DefaultLimits.HandshakesPerSecondPerSource,
		`xDS connections one remote IP address may open per second (as many at once), on each replica; one more is closed as soon as it is accepted (reason="source_handshakes").`)
	fs.IntVar(&v.XDSLimits.MaxRequestBytes, "xds-max-request-bytes", server.DefaultLimits.MaxRequestBytes,
		"Largest xDS request a stream may send (gRPC's receive limit); a larger one ends the stream (ResourceExhausted).")
	fs.IntVar(&v.XDSLimits.MaxNamesPerType, "xds-max-names-per-type", server.DefaultLimits.MaxNamesPerType,
		"Resource names one xDS stream may subscribe to, per type: in one state-of-the-world request, or added up over a delta stream's requests (and no more than --xds-max-request-bytes of them in all); "+
			`more end the stream (ResourceExhausted, reason="names"). A fleet whose proxies use more of one type needs more.`)
	fs.BoolVar(&v.XDSPlaintext, "xds-plaintext", false,
		"Serve xDS in plaintext, without authentication: anyone who reaches the port can read any fleet's configuration and secrets. Only for local experiments, and logged as a warning; by default xDS is served over mutual TLS only.")
	fs.StringVar(&v.PKI.TrustDomain, "xds-trust-domain", v.PKI.TrustDomain,
		"SPIFFE trust domain of the fleets' client certificates: spiffe://<trust domain>/ns/<namespace>/envoy/<name>.")
	fs.StringVar(&v.XDSCASecret, "xds-ca-secret", authority.DefaultSecretName,
		"Secret, in the operator's namespace, that holds the xDS certificate authority. The leader makes and rotates it.")
	fs.BoolVar(&v.XDSCARotation, "xds-ca-rotation", true,
		"Make and rotate the xDS CA in --xds-ca-secret. false: the Secret is kept by someone else, such as cert-manager (tls.crt and tls.key of a CA).")
	fs.DurationVar(&v.PKI.CAValidity, "xds-ca-validity", v.PKI.CAValidity,
		"Lifetime of an xDS CA; a new one is made when a third of it is left.")
	fs.DurationVar(&v.PKI.CertValidity, "xds-certificate-validity", v.PKI.CertValidity,
		"Lifetime of the xDS server's and the fleets' certificates; they are renewed when a third of it is left.")
	fs.DurationVar(&v.PKI.Propagation, "xds-ca-propagation", v.PKI.Propagation,
		"How long a new xDS CA is only trusted before it signs: time for every proxy's Secret to bring it.")
	fs.StringVar(&v.AllowedFiles, strings.TrimPrefix(translate.FilesFlag, "--"), "",
		"Comma-separated absolute paths of the proxies' file system that EnvoyConfigs may name, to read or to write (DataSources, access logs, sockets); "+
			"a directory ends in / and allows everything below it. None by default: an EnvoyConfig names a file to read what only the proxy's pod may (its ServiceAccount token, its xDS client certificate, which no entry may allow). "+
			"Configuration is never loaded from a file, and no entry may cover the proxy's own configuration in /etc/envoy/.")
	fs.StringVar(&v.AllowedEnv, strings.TrimPrefix(translate.EnvFlag, "--"), "",
		"Comma-separated environment variables of the proxies that EnvoyConfigs may name: in DataSources, tracing custom tags and %ENVIRONMENT(NAME)% in format strings. None by default.")
	fs.StringVar(&v.Bounds, strings.TrimPrefix(translate.BoundsFlag, "--"), "",
		"Comma-separated <field>=<min>:<max> that change the bounds of the EnvoyConfig fields that size the proxies' memory, CPU or connections (health check intervals, buffers, windows, circuit breakers, ignore_global_conn_limit...), "+
			"by the field's full name (envoy.config.core.v3.HealthCheck.interval=5s:1h), and of a fleet's resources of each kind (fleet.clusters=:2000; below --xds-max-names-per-type). "+
			"Durations for durations, true or false for bools, whole numbers otherwise; an empty side keeps the default. The defaults are in docs/concepts/security-model.md.")
	fs.StringVar(&v.Envoy.Envoy, "envoy-path", "envoy",
		"The Envoy binary (a path, or a name looked up on PATH) in which the operator loads each EnvoyConfig's resources (envoy --mode validate): at admission, and before the leader records a revision holding content that bypassed the webhook. "+
			"What it refuses is refused, with its words. Without one the operator says so at start, in the metric kube_envoy_controller_envoy_validation_available and in admission warnings and status, and admits on its rules alone. The image has it at /usr/local/bin/envoy.")
	fs.IntVar(&v.Envoy.Concurrency, "envoy-validation-concurrency", envoyjudge.DefaultConcurrency,
		"How many Envoys load EnvoyConfigs at once, at most, on each replica; a load waits for its turn within --envoy-validation-timeout.")
	fs.DurationVar(&v.Envoy.Timeout, "envoy-validation-timeout", envoyjudge.DefaultTimeout,
		"How long loading an EnvoyConfig in Envoy may take, its wait for a turn included; content not loaded by then is refused, saying so. Less than the validating webhook's timeout (5s).")
	fs.StringVar(&v.Replica, "replica-name", replica,
		"Name of this replica in the reports of its xDS proxies, unique among the replicas; defaults to $POD_NAME, else the host name.")
	fs.BoolVar(&v.ShowVersion, "version", false, "Print the version (git describe at build time) and exit.")
	v.Zap.BindFlags(fs)
	return v
}
