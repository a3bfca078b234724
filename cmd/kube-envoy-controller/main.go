// Command kube-envoy-controller is the operator's controller manager: it runs
// the controllers for Envoy fleets, sidecar injection and the classic sample
// resources in one process.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
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
		probeAddr            string
		leaderElect          bool
		leaderElectNamespace string
		qps                  float64
		burst                int
	)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.StringVar(&controllers, "controllers", "*", fmt.Sprintf(
		"Comma-separated controllers to run: '*' runs all, 'name' enables one, '-name' disables one. Known: %s.",
		strings.Join(controller.Names(), ", ")))
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one replica runs the controllers.")
	flag.StringVar(&leaderElectNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the pod's namespace in a cluster.")
	flag.Float64Var(&qps, "kube-api-qps", -1, "Client-side QPS limit towards the API server; 0 or less means none (the server's priority and fairness applies).")
	flag.IntVar(&burst, "kube-api-burst", 0, "Client-side burst towards the API server, with a positive --kube-api-qps (at least twice the QPS).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	selection, err := controller.ParseSelection(controllers)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	configureClient(cfg, float32(qps), burst)

	mgr, err := manager.New(cfg, manager.Options{
		MetricsAddr:             metricsAddr,
		ProbeAddr:               probeAddr,
		LeaderElect:             leaderElect,
		LeaderElectionNamespace: leaderElectNamespace,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	started, err := controller.Setup(mgr, selection, controller.Options{})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	log.Info("starting manager", "controllers", started, "apiServer", cfg.Host)
	// SetupSignalHandler cancels on SIGTERM or SIGINT; Start then stops the
	// controllers, waits for running reconciles and releases the lease.
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	log.Info("stopped")
	return nil
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
