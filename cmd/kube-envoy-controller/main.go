// Command kube-envoy-controller is the operator's controller manager: it runs
// the controllers for Envoy fleets, sidecar injection and the classic sample
// resources in one process.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoyconfig"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/version"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		controllers          string
		metricsAddr          string
		metricsSecure        bool
		probeAddr            string
		pprofAddr            string
		leaderElect          bool
		leaderElectNamespace string
		qps                  float64
		burst                int
		xdsServiceAddress    string
		xdsBindAddress       string
		concurrentReconciles int
		showVersion          bool
	)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.StringVar(&controllers, "controllers", "*", fmt.Sprintf(
		"Comma-separated controllers to run: '*' runs all, 'name' enables one, '-name' disables one. Known: %s.",
		strings.Join(controller.Names(), ", ")))
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.BoolVar(&metricsSecure, "metrics-secure", true,
		"Serve /metrics over HTTPS to scrapers whose token may GET /metrics (the API server reviews it); false serves plain HTTP to anyone.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address of Go's /debug/pprof endpoints (profiles, and the heap after a forced GC for the benchmarks); 0 disables them.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one replica runs the controllers.")
	flag.StringVar(&leaderElectNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the pod's namespace in a cluster.")
	le := manager.DefaultLeaderElection
	flag.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration,
		"How long a standby replica waits, after it last saw the leader renew the Lease, before it takes over.")
	flag.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline,
		"How long the leader keeps trying to renew the Lease before it stops leading; less than the lease duration.")
	flag.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "How often the leader renews the Lease and standbys try to take it.")
	flag.Float64Var(&qps, "kube-api-qps", -1, "Client-side QPS limit towards the API server; 0 or less means none (the server's priority and fairness applies).")
	flag.IntVar(&burst, "kube-api-burst", 0, "Client-side burst towards the API server, with a positive --kube-api-qps (at least twice the QPS).")
	flag.StringVar(&xdsServiceAddress, "xds-service-address", "kube-envoy-controller-xds.kube-envoy-controller.svc:18000",
		"host:port at which Envoy fleets without spec.xds reach the operator's built-in xDS server: the address of the Service in front of the operator.")
	hookFlags := webhook.BindFlags(flag.CommandLine)
	flag.IntVar(&concurrentReconciles, "concurrent-reconciles", manager.DefaultConcurrentReconciles,
		"How many objects each controller reconciles at once (PodSet sets its own).")
	flag.StringVar(&xdsBindAddress, "xds-bind-address", ":18000", "Address of the built-in xDS (ADS) server, served by every replica.")
	flag.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if showVersion {
		fmt.Println("kube-envoy-controller", version.String())
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	selection, err := controller.ParseSelection(controllers)
	if err != nil {
		return err
	}
	builtinXDS, err := parseXDSAddress(xdsServiceAddress)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	configureClient(cfg, float32(qps), burst)

	var hookHost string
	var hookPort int
	if hookFlags.Enabled() {
		if hookHost, hookPort, err = hookFlags.Server(); err != nil {
			return err
		}
	}
	mgr, err := manager.New(cfg, manager.Options{
		WebhookHost:             hookHost,
		WebhookPort:             hookPort,
		WebhookCertDir:          hookFlags.CertDir,
		MetricsAddr:             metricsAddr,
		MetricsSecure:           metricsSecure,
		ProbeAddr:               probeAddr,
		PprofAddr:               pprofAddr,
		LeaderElect:             leaderElect,
		LeaderElectionNamespace: leaderElectNamespace,
		LeaderElection:          le,
		ConcurrentReconciles:    concurrentReconciles,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	opts := controller.Options{Fleet: fleet.Defaults{XDS: builtinXDS}}
	if controller.Enabled(selection, envoyconfig.ControllerName) {
		notify, events := envoyconfig.ProxyEvents()
		opts.XDS = xds.NewServer(xdsBindAddress, ctrl.Log.WithName("xds"), notify)
		opts.ProxyEvents = events
		if err := mgr.Add(opts.XDS); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("xds", opts.XDS.Listening); err != nil {
			return err
		}
	}
	started, err := controller.Setup(mgr, selection, opts)
	if err != nil {
		return err
	}
	if hookFlags.Enabled() {
		if err := webhook.Setup(mgr, hookFlags.Options()); err != nil {
			return fmt.Errorf("setting up the webhook: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once the informers have synced (the webhooks and xDS answer from
	// them); the webhook and xDS servers add their own checks.
	if err := mgr.AddReadyzCheck("informers", manager.CacheSynced(mgr.GetCache())); err != nil {
		return err
	}

	log.Info("starting manager", "version", version.Version(), "revision", version.Revision(),
		"controllers", started, "apiServer", cfg.Host)
	// SetupSignalHandler cancels on SIGTERM or SIGINT; Start then stops the
	// controllers, waits for running reconciles and releases the lease.
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	log.Info("stopped")
	return nil
}

// parseXDSAddress parses --xds-service-address.
func parseXDSAddress(addr string) (proxy.XDSServer, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return proxy.XDSServer{}, fmt.Errorf("--xds-service-address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 || host == "" {
		return proxy.XDSServer{}, fmt.Errorf("--xds-service-address %q: want host:port with a port in 1..65535", addr)
	}
	return proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: host, Port: uint32(port)}, nil
}

// configureClient sets the client's identity and throttling. By default there is
// no client-side rate limit: the API server's priority and fairness decides.
func configureClient(cfg *rest.Config, qps float32, burst int) {
	cfg.UserAgent = "kube-envoy-controller"
	cfg.RateLimiter = nil
	if qps <= 0 {
		cfg.QPS = -1 // client-go: a negative QPS disables the client-side limiter
		return
	}
	cfg.QPS = qps
	cfg.Burst = max(burst, int(2*qps))
}
