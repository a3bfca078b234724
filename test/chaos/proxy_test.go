//go:build chaos

package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
)

// The fleet edge-c has a proxy of the suite's own, connected to the
// operator's xDS server with the fleet's certificate, which rejects every
// version that holds the cluster rejectedCluster: before the chaos starts,
// its EnvoyConfig routes-c gains that cluster, the proxy rejects it, and the
// fleet rolls back. Whatever the chaos then does (the fleet's history
// deleted or corrupted, reports deleted, the operator killed), that version
// must never be served again.
const (
	rejectingEnvoy  = "edge-c"
	rejectingConfig = "routes-c"
	rejectedCluster = "rejected"
)

// rejectingProxy is that proxy. It connects again whenever its stream ends.
type rejectingProxy struct {
	c    client.Client
	addr string // the operator's xDS address

	mu         sync.Mutex
	sessions   int      // streams opened
	responses  int      // responses received
	rolledBack bool     // set once the fleet rolled back
	after      int      // responses received since
	resent     []string // versions with rejectedCluster received since
	lastErr    error
}

// xdsAddress returns the operator's xDS address, from its command line.
func xdsAddress(args []string) string {
	for i, a := range args {
		if a == "--xds-bind-address" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--xds-bind-address="); ok {
			return v
		}
	}
	return ""
}

// run connects, answers, and connects again, until ctx ends.
func (p *rejectingProxy) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := p.session(ctx)
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// session is one stream: it ends with the stream, or an error before.
func (p *rejectingProxy) session(ctx context.Context) error {
	creds, err := p.credentials(ctx)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	node := &corev3.Node{Id: "chaos-proxy", Cluster: nsPlain + "/" + rejectingEnvoy}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.ClusterType}); err != nil {
		return err
	}
	p.mu.Lock()
	p.sessions++
	p.mu.Unlock()
	accepted := ""
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		rejected := false
		for _, a := range resp.GetResources() {
			m, err := a.UnmarshalNew()
			if err != nil {
				return err
			}
			rejected = rejected || cachev3.GetResourceName(m) == rejectedCluster
		}
		p.mu.Lock()
		p.responses++
		if p.rolledBack {
			p.after++
			if rejected {
				p.resent = append(p.resent, resp.GetVersionInfo())
			}
		}
		p.mu.Unlock()
		req := &discoveryv3.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
		if rejected {
			req.VersionInfo = accepted
			req.ErrorDetail = &statuspb.Status{Code: 3, Message: "cluster " + rejectedCluster + ": refused by the chaos proxy"}
		} else {
			accepted = resp.GetVersionInfo()
			req.VersionInfo = accepted
		}
		if err := st.Send(req); err != nil {
			return err
		}
	}
}

// credentials are the fleet's client certificate, from its Secret as the
// operator keeps it, and the CAs it trusts; the server is checked as
// localhost, a name of every replica's serving certificate.
func (p *rejectingProxy) credentials(ctx context.Context) (credentials.TransportCredentials, error) {
	s := &corev1.Secret{}
	if err := p.c.Get(ctx, client.ObjectKey{Namespace: nsPlain, Name: rejectingEnvoy + "-xds-client"}, s); err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(s.Data[proxy.ClientCertFile], s.Data[proxy.ClientKeyFile])
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data[proxy.TrustedCAFile]) {
		return nil, errors.New("no CA certificate in the fleet's Secret")
	}
	return credentials.NewTLS(&tls.Config{ServerName: "localhost", RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}), nil
}

// markRolledBack starts the watch for the rejected version: from now on,
// none may come.
func (p *rejectingProxy) markRolledBack() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rolledBack = true
}

// report says how many responses came since the rollback, and which of them
// served the rejected version again.
func (p *rejectingProxy) report() (after int, resent []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.after, append([]string(nil), p.resent...)
}

func (p *rejectingProxy) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d streams, %d responses, the last stream's end: %v", p.sessions, p.responses, p.lastErr)
}

// operatorNamespace is the operator's namespace, from its command line.
func operatorNamespace(args []string) string {
	for i, a := range args {
		if a == "--namespace" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--namespace="); ok {
			return v
		}
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "kube-envoy-controller"
}
