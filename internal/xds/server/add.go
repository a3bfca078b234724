package server

import (
	"net/http"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

// Options configure the xDS server of a replica.
type Options struct {
	// BindAddress is the server's host:port.
	BindAddress string
	// Namespace is the operator's namespace, where the replica's report goes.
	Namespace string
	// Replica names this replica; Pod is its pod, if any.
	Replica, Pod string
	// Limits bound the server's connections and streams; zero means DefaultLimits.
	Limits Limits
	// Authority, when set, has the server speak mutual TLS only, with its
	// certificate from the xDS CA; nil serves plaintext.
	Authority *authority.Store
	// Services are served on the server's port beside ADS (AddService).
	Services []Service
	// Stats, when set, gives the windows of the rolling fleets' proxies
	// (SetStats): the stats receiver, one of Services.
	Stats ProxyStats
}

// Add adds to mgr this replica's xDS server and the reporter of its
// proxies, a readiness check that passes once the server listens, and a
// health and a readiness check that fail when it can no longer publish.
func Add(mgr ctrl.Manager, o Options) (*Server, error) {
	srv := New(o.BindAddress, ctrl.Log.WithName("xds"))
	reporter := NewReporter(mgr, srv, o.Namespace, o.Replica, o.Pod)
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits
	}
	if err := srv.SetLimits(o.Limits); err != nil {
		return nil, err
	}
	if o.Authority != nil {
		srv.SetTLS(o.Authority.ServerConfig, o.Authority.Options.TrustDomain)
	}
	for _, svc := range o.Services {
		srv.AddService(svc)
	}
	if o.Stats != nil {
		srv.SetStats(o.Stats)
	}
	if err := mgr.Add(srv); err != nil {
		return nil, err
	}
	if err := mgr.Add(reporter); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("xds", srv.Listening); err != nil {
		return nil, err
	}
	if o.Authority != nil {
		// Not ready before the leader made the CA: until then no TLS
		// handshake can succeed.
		if err := mgr.AddReadyzCheck("xds-certificate-authority", func(req *http.Request) error {
			_, err := o.Authority.Authority(req.Context())
			return err
		}); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("xds-publishing", srv.Healthy); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("xds-publishing", srv.Healthy); err != nil {
		return nil, err
	}
	return srv, nil
}
