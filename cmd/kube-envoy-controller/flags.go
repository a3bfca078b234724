package main

import (
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/cmdline"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
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
	// envoy is the real Envoy EnvoyConfigs are loaded in, and its bounds.
	envoy envoyjudge.Options
	// showVersion asks for the version alone: the other flags are not checked.
	showVersion bool
}

// parseFlags registers the binary's flags on fs, parses args and checks them.
func parseFlags(fs *flag.FlagSet, args []string) (*settings, error) {
	v := cmdline.Register(fs, defaultReplicaName())
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	s := settings{
		manager: v.Manager, burst: v.Burst, xdsBindAddress: v.XDSBindAddress, debugBindAddress: v.DebugBindAddress,
		xdsLimits: v.XDSLimits, replica: v.Replica, showVersion: v.ShowVersion, zap: v.Zap,
	}
	if s.showVersion {
		return &s, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	var err error
	s.namespace = v.Webhook.Namespace
	if s.replica == "" {
		return nil, fmt.Errorf("--replica-name: empty")
	}
	if s.controllers, err = controller.ParseSelection(v.Controllers); err != nil {
		return nil, err
	}
	if s.builtinXDS, err = parseXDSAddress(v.XDSServiceAddress); err != nil {
		return nil, err
	}
	if !v.XDSPlaintext {
		if err := v.PKI.Check(); err != nil {
			return nil, fmt.Errorf("xDS certificates: %w", err)
		}
		s.builtinXDS.MutualTLS = true
		s.xdsCA = &authority.Config{
			Namespace: v.Webhook.Namespace, SecretName: v.XDSCASecret, Options: v.PKI, External: !v.XDSCARotation,
			// The Service's name for proxies in the cluster; localhost for
			// an operator on the host, and for clients beside it.
			Hosts: []string{s.builtinXDS.Host, "localhost", "127.0.0.1"},
		}
	}
	if v.ConcurrentReconciles < 1 {
		return nil, fmt.Errorf("--concurrent-reconciles %d: want at least 1", v.ConcurrentReconciles)
	}
	s.manager.ConcurrentReconciles = v.ConcurrentReconciles
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
	s.qps = float32(v.QPS)
	s.policy = translate.Policy{Files: splitList(v.AllowedFiles), Env: splitList(v.AllowedEnv), Namespace: v.Webhook.Namespace}
	if s.policy.Bounds, err = translate.ParseBounds(v.Bounds); err != nil {
		return nil, err
	}
	if s.policy.Bounds, err = s.policy.Bounds.FitFleetCounts(s.xdsLimits.MaxNamesPerType); err != nil {
		return nil, err
	}
	// The operator's other names, beside its namespace's: where fleets
	// reach its xDS Service, and where the API server reaches its webhook
	// (on the host, in development, loopback: the proxies' own).
	for _, h := range []string{s.builtinXDS.Host, v.Webhook.WebhookDNSName()} {
		if !isLoopback(h) {
			s.policy.Hosts = append(s.policy.Hosts, h)
		}
	}
	if err := s.policy.Check(); err != nil {
		return nil, err
	}
	s.envoy = v.Envoy
	switch {
	case s.envoy.Envoy == "":
		return nil, fmt.Errorf("--envoy-path: empty; the operator loads EnvoyConfigs in a real Envoy (default: envoy on PATH)")
	case s.envoy.Concurrency < 1:
		return nil, fmt.Errorf("--envoy-validation-concurrency %d: want at least 1", s.envoy.Concurrency)
	case s.envoy.Timeout <= 0 || s.envoy.Timeout > maxEnvoyValidationTimeout:
		return nil, fmt.Errorf("--envoy-validation-timeout %s: want a positive duration, at most %s (the validating webhook's own timeout)", s.envoy.Timeout, maxEnvoyValidationTimeout)
	}
	if v.Webhook.Enabled() {
		if s.manager.WebhookHost, s.manager.WebhookPort, err = v.Webhook.Server(); err != nil {
			return nil, err
		}
		s.manager.WebhookCertDir = v.Webhook.CertDir
		o := v.Webhook.Options()
		s.webhook = &o
	}
	return &s, nil
}

// maxEnvoyValidationTimeout is the validating webhook's timeoutSeconds
// (validate.EnvoyConfigValidator): a longer load is cut by the API server.
const maxEnvoyValidationTimeout = 5 * time.Second

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
