package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	fleetid "github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// A real Envoy whose bootstrap asks for a type the server does not serve
// (a static listener's HTTP filter configured by extension config
// discovery over ADS) gets its clusters and listeners, applies them, and
// applies the next push, on the one stream it opened, over either
// protocol.
func TestRealEnvoyUnservedTypeKeepsItsStream(t *testing.T) {
	envoy := realenvoy.Require(t)
	for _, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) {
			a := newAuthority(t)
			s, addr := startTLSServer(t, a)
			ports, err := realenvoy.FreePorts(3)
			if err != nil {
				t.Fatal(err)
			}
			admin, static, dynamic := ports[0], ports[1], ports[2]
			v0 := "v0"
			mustPublish(t, s, v0, unservedEnvoyFleet(dynamic, 0))
			ecds := unservedCount(t, "extension_config")

			p := startUnservedEnvoy(t, envoy, a, addr, admin, static, delta)
			ctx := context.Background()
			// Envoy waits for the filter's configuration for its config
			// source's initial_fetch_timeout (one second here), then starts
			// without it: the listeners serve once it has.
			testenv.Poll(t, 50*time.Millisecond, testenv.Timeout, "Envoy to serve the published listener", func() (bool, error) {
				body, err := get(ctx, fmt.Sprintf("http://127.0.0.1:%d/", dynamic))
				return body == "generation 0", err
			})
			testenv.Poll(t, 50*time.Millisecond, testenv.Timeout, "Envoy to apply cluster c0", func() (bool, error) {
				_, err := p.stat(ctx, "cluster.c0.membership_total")
				return err == nil, err
			})
			waitCounts(t, s, v0, ProxyCounts{Connected: 1, Acked: 1})

			mustPublish(t, s, "v1", unservedEnvoyFleet(dynamic, 1))
			testenv.Poll(t, 50*time.Millisecond, testenv.Timeout, "Envoy to apply the push's listener", func() (bool, error) {
				body, err := get(ctx, fmt.Sprintf("http://127.0.0.1:%d/", dynamic))
				return body == "generation 1", err
			})
			testenv.Poll(t, 50*time.Millisecond, testenv.Timeout, "Envoy to apply cluster c1", func() (bool, error) {
				_, err := p.stat(ctx, "cluster.c1.membership_total")
				return err == nil, err
			})
			waitCounts(t, s, "v1", ProxyCounts{Connected: 1, Acked: 1})

			// One stream all along: Envoy opened one ADS stream (a stream
			// the server ended would have been opened again, and asked for
			// the filter's configuration again), and it is connected.
			if got := unservedCount(t, "extension_config") - ecds; got != 1 {
				t.Errorf("%v subscriptions to extension configs counted, want the one stream's", got)
			}
			for stat, want := range map[string]int64{"cluster.xds_cluster.upstream_rq_total": 1, "control_plane.connected_state": 1} {
				if got, err := p.stat(ctx, stat); err != nil || got != want {
					t.Errorf("Envoy's %s is %d (%v), want %d", stat, got, err, want)
				}
			}
		})
	}
}

// unservedEnvoyFleet is a listener on port that answers every request with
// its generation g, and a cluster named after g.
func unservedEnvoyFleet(port uint32, g int) map[string][]types.Resource {
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: "published",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "published",
			VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200,
					Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: fmt.Sprintf("generation %d", g)}}}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}},
	})
	if err != nil {
		panic(err)
	}
	address := func(port uint32) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
	}
	name := fmt.Sprintf("c%d", g)
	return map[string][]types.Resource{
		resourcev3.ListenerType: {&listenerv3.Listener{Name: "published", Address: address(port),
			FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}}}},
		resourcev3.ClusterType: {&clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: address(9)}}}}}}}}},
	}
}

// unservedBootstrap is an Envoy of fleet ns/edge that reaches the server at
// xds over mutual TLS, with a static listener on static whose HTTP filter
// is configured by extension config discovery over ADS.
const unservedBootstrap = `node: {id: envoy-1, cluster: ns/edge}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: %[1]d}}}
dynamic_resources:
  ads_config:
    api_type: %[2]s
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services: [{envoy_grpc: {cluster_name: xds_cluster}}]
  cds_config: {ads: {}, resource_api_version: V3}
  lds_config: {ads: {}, resource_api_version: V3}
static_resources:
  clusters:
  - name: xds_cluster
    type: STATIC
    connect_timeout: 5s
    load_assignment:
      cluster_name: xds_cluster
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %[3]s}}}}]}]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        '@type': type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        '@type': type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          alpn_protocols: [h2]
          tls_params: {tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3}
          tls_certificates: [{certificate_chain: {filename: %[4]s/tls.crt}, private_key: {filename: %[4]s/tls.key}}]
          validation_context:
            trusted_ca: {filename: %[4]s/ca.crt}
            match_typed_subject_alt_names: [{san_type: DNS, matcher: {exact: localhost}}]
  listeners:
  - name: discovered-filter
    address: {socket_address: {address: 127.0.0.1, port_value: %[5]d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          '@type': type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: discovered
          route_config:
            virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, direct_response: {status: 200}}]}]
          http_filters:
          - name: discovered
            config_discovery:
              config_source: {ads: {}, resource_api_version: V3, initial_fetch_timeout: 1s}
              type_urls: [type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer]
          - name: envoy.filters.http.router
            typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// unservedEnvoy is the Envoy process of the test.
type unservedEnvoy struct {
	admin uint32
	mu    sync.Mutex
	out   bytes.Buffer
}

func (p *unservedEnvoy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *unservedEnvoy) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stat returns one of Envoy's stats.
func (p *unservedEnvoy) stat(ctx context.Context, name string) (int64, error) {
	body, err := get(ctx, fmt.Sprintf("http://127.0.0.1:%d/stats?filter=^%s$", p.admin, strings.ReplaceAll(name, ".", `\.`)))
	if err != nil {
		return 0, err
	}
	var v int64
	if _, err := fmt.Sscanf(strings.TrimSpace(body), name+": %d", &v); err != nil {
		return 0, fmt.Errorf("stat %s: %q: %w", name, body, err)
	}
	return v, nil
}

// startUnservedEnvoy starts Envoy as proxy envoy-1 of fleet ns/edge, with
// its client certificate from a, until the test ends.
func startUnservedEnvoy(t *testing.T, envoy string, a pki.Authority, xds string, admin, static uint32, delta bool) *unservedEnvoy {
	t.Helper()
	dir := t.TempDir()
	leaf, err := pki.IssueClient(a, fleetid.ID{Namespace: "ns", Name: "edge"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": a.Bundle()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, port, _ := strings.Cut(xds, ":")
	api := map[bool]string{false: "GRPC", true: "DELTA_GRPC"}[delta]
	bootstrap := filepath.Join(dir, "bootstrap.yaml")
	if err := os.WriteFile(bootstrap, fmt.Appendf(nil, unservedBootstrap, admin, api, port, dir, static), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &unservedEnvoy{admin: admin}
	cmd := exec.Command(envoy, "-c", bootstrap, "--disable-hot-restart", "--log-level", "info")
	cmd.Stdout, cmd.Stderr = p, p
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("Envoy's output:\n%s", p.output())
		}
	})
	return p
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// get returns the body of url.
func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
