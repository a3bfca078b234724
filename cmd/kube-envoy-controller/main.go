// Command kube-envoy-controller is the operator's controller manager: it runs
// the controllers for Envoy fleets, sidecar injection and the classic sample
// resources in one process.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/announce"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoyconfig"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/version"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug/endpoint"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/server"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/stats"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	s, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		return err
	}
	if s.showVersion {
		fmt.Println("kube-envoy-controller", version.String())
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&s.zap)))
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	configureClient(cfg, s.qps, s.burst)

	mgr, err := manager.New(cfg, s.manager)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	opts := controller.Options{Fleet: fleet.Defaults{XDS: s.builtinXDS, Namespace: s.namespace, XDSPorts: xdsPorts(s.builtinXDS, s.xdsBindAddress)},
		Namespace: s.namespace, Policy: s.policy}
	opts.Envoy = newJudge(log, s.envoy)
	if s.xdsCA == nil {
		log.Info("WARNING: the built-in xDS server serves plaintext (--xds-plaintext): any client that reaches its port can read any fleet's configuration and secrets")
	} else if controller.Enabled(s.controllers, envoyconfig.ControllerName) || controller.Enabled(s.controllers, envoy.ControllerName) {
		if opts.Authority, err = authority.Add(mgr, *s.xdsCA); err != nil {
			return err
		}
	}
	if controller.Enabled(s.controllers, envoyconfig.ControllerName) {
		receiver := newStatsReceiver(opts.Authority)
		opts.XDS, err = server.Add(mgr, server.Options{
			BindAddress: s.xdsBindAddress, Namespace: s.namespace, Replica: s.replica, Pod: os.Getenv("POD_NAME"),
			Limits: s.xdsLimits, Authority: opts.Authority, Services: []server.Service{receiver}, Stats: receiver,
		})
		if err != nil {
			return err
		}
	}
	if err := addDebug(mgr, cfg, s, opts); err != nil {
		return err
	}
	started, err := controller.Setup(mgr, s.controllers, opts)
	if err != nil {
		return err
	}
	if s.webhook != nil {
		s.webhook.Fleet, s.webhook.Policy, s.webhook.Envoy = opts.Fleet, s.policy, opts.Envoy
		if err := webhook.Setup(mgr, *s.webhook); err != nil {
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

// newStatsReceiver returns the receiver of the stats that the fleets'
// proxies stream, served on the xDS server's port over the mutual TLS of
// their ADS connection and checked against the same trust domain (nothing
// in plaintext, as ADS). The server reads it for the windows of the
// rolling fleets' proxies, which its report carries to the leader (the
// scopes of the bootstrap's own xDS cluster, ready listener and admin
// cluster left out: stats.BootstrapScopes). It
// holds them within stats.DefaultOptions: at most 10,000 streams and
// 10,000 proxies (9,000 of one fleet) of 32 scopes, each scope's figures
// 192 bytes and its name at most 256, so at most about 14 KiB a proxy and
// 140 MiB in all, far less with a few scopes a proxy.
func newStatsReceiver(a *authority.Store) *stats.Receiver {
	o := stats.DefaultOptions
	o.Own = stats.BootstrapScopes(fleet.XDSClusterName)
	if a != nil {
		o.TrustDomain = a.Options.TrustDomain
	}
	return stats.New(o)
}

// newJudge returns the judge of EnvoyConfigs with o's Envoy, and says once,
// in log, whether it has one: without it, EnvoyConfigs are admitted and
// served on the operator's rules alone.
func newJudge(log logr.Logger, o envoyjudge.Options) *envoyjudge.Judge {
	j := envoyjudge.New(context.Background(), o)
	if err := j.Unavailable(); err != nil {
		log.Info("WARNING: EnvoyConfigs are admitted and served on the operator's rules alone, not loaded in a real Envoy first; admission warns of it, status says it, and kube_envoy_controller_envoy_validation_available is 0",
			"reason", err.Error())
		return j
	}
	path, version := j.Envoy()
	log.Info("EnvoyConfigs are loaded in a real Envoy before they are admitted or recorded", "envoy", path, "version", version,
		"concurrency", o.Concurrency, "timeout", o.Timeout)
	return j
}

// addDebug adds the xDS debug endpoint, when it is asked for and there is an
// xDS server to show and a CA to issue its certificate.
func addDebug(mgr ctrl.Manager, cfg *rest.Config, s *settings, opts controller.Options) error {
	log := ctrl.Log.WithName("setup")
	switch {
	case s.debugBindAddress == "0":
		return nil
	case opts.XDS == nil:
		log.Info("the xDS debug endpoint is off: the EnvoyConfig controller, whose xDS server it shows, is not running")
		return nil
	case opts.Authority == nil:
		log.Info("the xDS debug endpoint is off: it serves the xDS CA's certificate, and xDS is plaintext (--xds-plaintext)")
		return nil
	}
	srv, err := endpoint.New(endpoint.Options{
		BindAddress: s.debugBindAddress, Replica: s.replica, Config: cfg,
		Certificate: opts.Authority.ServerCertificate, Source: opts.XDS, Log: ctrl.Log.WithName("xds-debug"),
		Histories: mgr.GetClient(), Namespace: s.namespace,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(srv); err != nil {
		return err
	}
	if os.Getenv("POD_NAME") != "" {
		return nil // in a pod: kubectl envoy finds the pod
	}
	// On a host (make run): kubectl envoy finds the endpoint's loopback
	// address in a Lease of the operator's namespace.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return mgr.Add(announce.New(announce.Options{Client: cs, Namespace: s.namespace, Replica: s.replica,
		Addr: srv.Addr, Log: ctrl.Log.WithName("xds-debug")}))
}

// xdsPorts are the ports the proxies reach the built-in xDS server's pods
// at, as a NetworkPolicy sees them: its bind address's port (the Service's
// target port, by the chart), and the Service's port.
func xdsPorts(service proxy.XDSServer, bindAddress string) []int32 {
	out := []int32{int32(service.Port)}
	if _, p, err := net.SplitHostPort(bindAddress); err == nil {
		if n, err := strconv.ParseUint(p, 10, 16); err == nil && n != 0 && int32(n) != out[0] {
			out = append(out, int32(n))
		}
	}
	return out
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
