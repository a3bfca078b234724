package xdstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HealthBackend starts a gRPC server, for the test's duration, whose health
// service knows the one service name, so that a client can tell which
// backend answered. It returns its port on 127.0.0.1.
func HealthBackend(t testing.TB, name string) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	h := health.NewServer()
	h.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, h)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().(*net.TCPAddr).Port
}

// GRPCBootstrap is the xDS bootstrap of a proxyless gRPC client, node id of
// fleet, that reaches the server at serverURI over mutual TLS with a
// fleet's client certificate: certPEM, keyPEM and the CAs caPEM are
// written to files, as a fleet's Secret is mounted, for the test's duration.
func GRPCBootstrap(t testing.TB, serverURI, fleet, id string, certPEM, keyPEM, caPEM []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": caPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "server_features": ["xds_v3"], "channel_creds": [{"type": "tls", "config": {
    "certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q}}]}],
  "node": {"id": %q, "cluster": %q}
}`, serverURI, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"), id, fleet)
}

// Serves reports whether the backend that answers a health check on conn,
// within timeout, knows service name (see HealthBackend).
func Serves(conn grpc.ClientConnInterface, name string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: name})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}
