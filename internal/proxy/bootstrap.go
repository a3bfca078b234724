// Package proxy renders what an Envoy proxy of a fleet runs with: its v3
// bootstrap and its container. Everything here is pure. The Envoy controller
// uses it for fleets, and sidecar injection for Envoy sidecars.
package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"path"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"
)

// Ports every proxy uses besides its listeners.
const (
	// AdminPort is Envoy's admin interface. It is bound to 127.0.0.1 only.
	AdminPort = 19000
	// ReadyPort is the static listener that exposes only /ready and
	// /stats/prometheus from admin, for probes and Prometheus.
	ReadyPort = 19001
)

// Names inside the bootstrap.
const (
	// AdminClusterName is the static cluster of Envoy's admin interface,
	// which the ready listener routes to.
	AdminClusterName = "envoy_admin"
	// ReadyListenerName is the static listener on ReadyPort.
	ReadyListenerName = "envoy_ready_stats"
)

// BootstrapKey is the ConfigMap key of the bootstrap, and the file name Envoy reads.
const BootstrapKey = "envoy.yaml"

// XDSServer is the management server a fleet takes its configuration from.
type XDSServer struct {
	// ClusterName is the bootstrap's static cluster that reaches the server.
	ClusterName string
	Host        string
	Port        uint32
	// MutualTLS has the proxy reach the server over mutual TLS: it presents
	// the fleet's client certificate and verifies that the server is Host
	// and chains to the fleet's trusted CAs, all read from the files of
	// ClientCertDir (see SDSFiles).
	MutualTLS bool
	// StatsSink has the proxy stream its stats to the server's metrics
	// service over the same cluster, every StatsFlushInterval (see
	// StatsSink). Only the built-in xDS server serves it.
	StatsSink bool
}

// String returns host:port.
func (s XDSServer) String() string { return fmt.Sprintf("%s:%d", s.Host, s.Port) }

// Bootstrap returns the v3 bootstrap of a proxy that takes its listeners and
// clusters over ADS from xds, within the limits of o, and, with
// xds.StatsSink, streams its stats to xds (StatsSink). The node's id and
// cluster are not in it: Envoy takes them from --service-node and
// --service-cluster.
func Bootstrap(xds XDSServer, o Overload) *bootstrapv3.Bootstrap {
	ads := &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
	b := &bootstrapv3.Bootstrap{
		Admin: &bootstrapv3.Admin{Address: socketAddress("127.0.0.1", AdminPort)},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:                   corev3.ApiConfigSource_GRPC,
				TransportApiVersion:       corev3.ApiVersion_V3,
				SetNodeOnFirstMessageOnly: true,
				GrpcServices: []*corev3.GrpcService{{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
						EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xds.ClusterName},
					},
				}},
			},
			LdsConfig: ads,
			CdsConfig: ads,
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{
				xdsCluster(xds),
				staticCluster(AdminClusterName, "127.0.0.1", AdminPort),
			},
			Listeners: []*listenerv3.Listener{readyListener()},
		},
		OverloadManager: overloadManager(o),
	}
	if xds.StatsSink {
		b.StatsSinks = []*metricsv3.StatsSink{StatsSink(xds.ClusterName)}
		b.StatsFlushInterval = durationpb.New(StatsFlushInterval)
	}
	return b
}

// xdsCluster reaches the xDS server over HTTP/2, with keepalives so that a
// dead server connection is noticed.
func xdsCluster(xds XDSServer) *clusterv3.Cluster {
	c := staticCluster(xds.ClusterName, xds.Host, xds.Port)
	// The control plane is trusted and its responses can be large: Envoy's
	// default buffer, not the limit for the pod network's peers.
	c.PerConnectionBufferLimitBytes = nil
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
	c.DnsLookupFamily = clusterv3.Cluster_V4_PREFERRED
	if xds.MutualTLS {
		c.TransportSocket = &corev3.TransportSocket{
			Name:       "envoy.transport_sockets.tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(upstreamTLS(xds))},
		}
	}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{
		"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(&upstreamhttpv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
						Http2ProtocolOptions: &corev3.Http2ProtocolOptions{
							ConnectionKeepalive: &corev3.KeepaliveSettings{
								Interval: durationpb.New(30 * time.Second),
								Timeout:  durationpb.New(5 * time.Second),
							},
						},
					},
				},
			},
		}),
	}
	return c
}

// upstreamTLS is the xDS connection's TLS: TLS 1.3 with HTTP/2 by ALPN, the
// fleet's certificate and the trusted CAs through SDS from files (so that a
// renewed certificate or a new CA is taken up without a restart), and the
// server's name checked against Host.
func upstreamTLS(xds XDSServer) *tlsv3.UpstreamTlsContext {
	san := &tlsv3.SubjectAltNameMatcher{
		SanType: tlsv3.SubjectAltNameMatcher_DNS,
		Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: xds.Host}},
	}
	sni := xds.Host
	if net.ParseIP(xds.Host) != nil {
		san.SanType = tlsv3.SubjectAltNameMatcher_IP_ADDRESS
		sni = "" // SNI carries host names only
	}
	fromFile := func(name string) *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
				Path: path.Join(BootstrapDir, name),
			}},
		}
	}
	return &tlsv3.UpstreamTlsContext{
		Sni: sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{
				TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
				TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
			},
			AlpnProtocols: []string{"h2"},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{
				Name: ClientCertSecretName, SdsConfig: fromFile(ClientCertSDSFile),
			}},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext: &tlsv3.CertificateValidationContext{
						MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{san},
					},
					ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{
						Name: TrustedCASecretName, SdsConfig: fromFile(TrustedCASDSFile),
					},
				},
			},
		},
	}
}

// Names of the SDS secrets of the xDS connection, and the files, next to
// the bootstrap, that deliver them.
const (
	ClientCertSecretName = "xds_client_certificate"
	TrustedCASecretName  = "xds_trusted_ca"
	ClientCertSDSFile    = "xds-client-certificate.yaml"
	TrustedCASDSFile     = "xds-trusted-ca.yaml"
)

// Files of the fleet's client certificate Secret, mounted at ClientCertDir:
// the kubernetes.io/tls keys and the CA bundle.
const (
	ClientCertFile = "tls.crt"
	ClientKeyFile  = "tls.key"
	TrustedCAFile  = "ca.crt"
)

// SDSFiles returns the SDS files, by name, that deliver the xDS connection's
// certificate and trusted CAs to a proxy of xds: nil without MutualTLS. They
// name the files of ClientCertDir and watch that directory, so that the
// kubelet's update of the mounted Secret reaches Envoy at once.
func SDSFiles(xds XDSServer) map[string]*discoveryv3.DiscoveryResponse {
	if !xds.MutualTLS {
		return nil
	}
	file := func(name string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path.Join(ClientCertDir, name)}}
	}
	watched := &corev3.WatchedDirectory{Path: ClientCertDir}
	return map[string]*discoveryv3.DiscoveryResponse{
		ClientCertSDSFile: sdsResponse(&tlsv3.Secret{
			Name: ClientCertSecretName,
			Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
				CertificateChain: file(ClientCertFile), PrivateKey: file(ClientKeyFile), WatchedDirectory: watched,
			}},
		}),
		TrustedCASDSFile: sdsResponse(&tlsv3.Secret{
			Name: TrustedCASecretName,
			Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: file(TrustedCAFile), WatchedDirectory: watched,
			}},
		}),
	}
}

func sdsResponse(s *tlsv3.Secret) *discoveryv3.DiscoveryResponse {
	return &discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{mustAny(s)}}
}

func staticCluster(name, host string, port uint32) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                          name,
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(BufferLimitBytes),
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:                durationpb.New(5 * time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
						Endpoint: &endpointv3.Endpoint{Address: socketAddress(host, port)},
					},
				}},
			}},
		},
	}
}

// readyListener serves /ready and /stats/prometheus from admin on ReadyPort,
// and nothing else of admin.
func readyListener() *listenerv3.Listener {
	toAdmin := &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: AdminClusterName},
	}}
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: ReadyListenerName,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: ReadyListenerName,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    ReadyListenerName,
				Domains: []string{"*"},
				Routes: []*routev3.Route{
					{
						Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/ready"}},
						Action: toAdmin,
					},
					{
						Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/stats/prometheus"}},
						Action: toAdmin,
					},
				},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
		}},
	}
	return &listenerv3.Listener{
		Name:                          ReadyListenerName,
		Address:                       socketAddress("0.0.0.0", ReadyPort),
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(BufferLimitBytes),
		// A proxy at its connection limit is still probed and scraped.
		IgnoreGlobalConnLimit: true,
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
			}},
		}},
	}
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// mustAny packs m. It fails only for a message that is not registered, which
// the imports of this file rule out.
func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("packing %T: %v", m, err))
	}
	return a
}

// RenderBootstrap returns the bootstrap for xds and o as YAML, after checking
// it against Envoy's own validation rules.
func RenderBootstrap(xds XDSServer, o Overload) ([]byte, error) {
	b := Bootstrap(xds, o)
	if err := b.ValidateAll(); err != nil {
		return nil, fmt.Errorf("invalid bootstrap: %w", err)
	}
	return YAML(b)
}

// RenderFiles returns every file a proxy of xds reads from its bootstrap
// ConfigMap, by key: the bootstrap (with the limits of o) and, with mutual
// TLS, the SDS files. Each passes Envoy's validation rules.
func RenderFiles(xds XDSServer, o Overload) (map[string][]byte, error) {
	bootstrap, err := RenderBootstrap(xds, o)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{BootstrapKey: bootstrap}
	for name, resp := range SDSFiles(xds) {
		if err := resp.ValidateAll(); err != nil {
			return nil, fmt.Errorf("invalid SDS file %s: %w", name, err)
		}
		for _, r := range resp.GetResources() {
			s := &tlsv3.Secret{}
			if err := r.UnmarshalTo(s); err != nil {
				return nil, err
			}
			if err := s.ValidateAll(); err != nil {
				return nil, fmt.Errorf("invalid SDS file %s: %w", name, err)
			}
		}
		if files[name], err = YAML(resp); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// FileKeys are the keys of RenderFiles' result for xds, sorted.
func FileKeys(xds XDSServer) []string {
	if xds.MutualTLS {
		return []string{BootstrapKey, ClientCertSDSFile, TrustedCASDSFile}
	}
	return []string{BootstrapKey}
}

// YAML encodes m as the files of a fleet's ConfigMap hold it: its proto
// field names, keys sorted.
func YAML(m proto.Message) ([]byte, error) {
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", m, err)
	}
	// protojson's output varies in its spacing on purpose; YAML with sorted
	// keys is stable, so an unchanged file never causes a write.
	return yaml.JSONToYAML(js)
}

// ParseBootstrap decodes a YAML or JSON bootstrap strictly: a field Envoy's v3
// API does not have is an error. It then applies Envoy's validation rules.
func ParseBootstrap(data []byte) (*bootstrapv3.Bootstrap, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	b := &bootstrapv3.Bootstrap{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(js, b); err != nil {
		return nil, err
	}
	if err := b.ValidateAll(); err != nil {
		return nil, err
	}
	return b, nil
}

// Hash returns a short, stable hash of a bootstrap.
func Hash(bootstrap []byte) string {
	sum := sha256.Sum256(bootstrap)
	return hex.EncodeToString(sum[:8])
}
