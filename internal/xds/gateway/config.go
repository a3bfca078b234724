package gateway

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// connectTimeout is how long the proxies wait for a backend's connection.
const connectTimeout = 5 * time.Second

// config writes what the fleet serves of the Gateway: for each port of a
// valid listener, an Envoy listener and its route configuration; the
// clusters its routes send to, with their serviceEndpoints; and the
// certificates of its HTTPS listeners, as tlsSecrets.
func (t *translation) config(ls []*listener) (translate.Config, error) {
	c := translate.Config{
		Name:    ConfigName(t.gw.Namespace, t.gw.Name),
		Created: t.in.Gateway.CreationTimestamp.Time,
		Spec:    examplev1.EnvoyConfigSpec{EnvoyRef: t.in.FleetName},
	}
	res := &c.Spec.Resources
	used := map[string]bool{}
	for _, port := range t.sortedPorts() {
		rc := t.routeConfiguration(port, ls, used)
		l, err := t.envoyListener(port, ls)
		if err != nil {
			return c, err
		}
		if err := appendRaw(&res.Routes, rc); err != nil {
			return c, err
		}
		if err := appendRaw(&res.Listeners, l); err != nil {
			return c, err
		}
	}
	for _, name := range sortedSet(used) {
		if ec, ok := t.earlierCluster[name]; ok && t.clusters[name] == nil {
			// A cluster only a refused route's earlier rules send to.
			res.Clusters = append(res.Clusters, ec.raw)
			if ec.endpoints != nil {
				c.Spec.ServiceEndpoints = append(c.Spec.ServiceEndpoints, *ec.endpoints)
			}
			continue
		}
		cl, err := t.envoyCluster(name)
		if err != nil {
			return c, err
		}
		if err := appendRaw(&res.Clusters, cl); err != nil {
			return c, err
		}
		if k, ok := t.clusters[name]; ok {
			c.Spec.ServiceEndpoints = append(c.Spec.ServiceEndpoints, examplev1.ServiceEndpoints{
				Cluster: name, Service: localRef(t.gw.Namespace, k.service), Port: k.port,
			})
		}
	}
	c.Spec.TLSSecrets = t.tlsSecrets(ls)
	return c, nil
}

// appendRaw appends m to list, in JSON with Envoy's field names.
func appendRaw(list *[]runtime.RawExtension, m proto.Message) error {
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("writing %T: %w", m, err)
	}
	// protojson's spacing is not stable: the same resource must make the
	// same bytes, whose hash names the fleet's revision.
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return fmt.Errorf("reading back %T: %w", m, err)
	}
	if js, err = json.Marshal(v); err != nil {
		return fmt.Errorf("writing %T: %w", m, err)
	}
	*list = append(*list, runtime.RawExtension{Raw: js})
	return nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// routeConfiguration is the route configuration of a port: a virtual host
// for each hostname its routes are served under (hostRoutes). The
// clusters they send to are added to used.
func (t *translation) routeConfiguration(port gwv1.PortNumber, ls []*listener, used map[string]bool) *routev3.RouteConfiguration {
	byHost := t.ports[port]
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	hostOrder(hosts)
	// The Host is matched without its port, and sent on with it.
	rc := &routev3.RouteConfiguration{Name: portName(t.gw, int32(port)), IgnorePortInHostMatching: true}
	for _, h := range hosts {
		vh := &routev3.VirtualHost{Name: h, Domains: []string{h}}
		es, groups := hostRoutes(byHost, owner(ls, port, h), h)
		vh.Metadata = hostGroupsMetadata(groups)
		for _, e := range es {
			route := e.route
			if e.listenerPort && port != 80 && port != 443 {
				// To the listener's port, which a well-known one leaves out.
				route = proto.Clone(route).(*routev3.Route)
				route.GetRedirect().PortRedirect = uint32(port)
			}
			vh.Routes = append(vh.Routes, route)
			for _, c := range e.clusters {
				used[c] = true
			}
		}
		rc.VirtualHosts = append(rc.VirtualHosts, vh)
	}
	return rc
}

// ads is the config source of what the operator serves: itself, over ADS.
func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// envoyListener is the Envoy listener of a port: one filter chain, or
// for HTTPS one for each valid listener, matched by SNI (the listener
// without a hostname taking the others).
func (t *translation) envoyListener(port gwv1.PortNumber, ls []*listener) (*listenerv3.Listener, error) {
	name := portName(t.gw, int32(port))
	out := &listenerv3.Listener{
		Name: name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ContainerPort(int32(port)))},
		}}},
	}
	hcm, err := httpConnectionManager(name, port)
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if !l.valid() || l.spec.Port != port {
			continue
		}
		fc := &listenerv3.FilterChain{Name: string(l.spec.Name), Filters: []*listenerv3.Filter{hcm}}
		if l.spec.Protocol == gwv1.HTTPSProtocolType {
			if fc.TransportSocket, err = downstreamTLS(l.certs); err != nil {
				return nil, err
			}
			if l.spec.Hostname != nil {
				fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: []string{string(*l.spec.Hostname)}}
			}
		}
		out.FilterChains = append(out.FilterChains, fc)
		if l.spec.Protocol == gwv1.HTTPProtocolType {
			break // one chain serves every HTTP listener of the port
		}
	}
	if len(out.FilterChains) > 0 && out.FilterChains[0].TransportSocket != nil {
		inspector, err := anypb.New(&tlsinspectorv3.TlsInspector{})
		if err != nil {
			return nil, err
		}
		out.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name: "envoy.filters.listener.tls_inspector", ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
		}}
	}
	return out, nil
}

// httpConnectionManager is the network filter of a port's chains: its
// routes over RDS.
func httpConnectionManager(routeConfig string, port gwv1.PortNumber) (*listenerv3.Filter, error) {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: fmt.Sprintf("gateway_%d", port),
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: routeConfig, ConfigSource: ads(),
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}, nil
}

// downstreamTLS terminates TLS with a listener's certificates, over SDS.
func downstreamTLS(certs []certificate) (*corev3.TransportSocket, error) {
	ctx := &tlsv3.CommonTlsContext{AlpnProtocols: []string{"h2", "http/1.1"}}
	for _, c := range certs {
		ctx.TlsCertificateSdsSecretConfigs = append(ctx.TlsCertificateSdsSecretConfigs, &tlsv3.SdsSecretConfig{Name: c.sds, SdsConfig: ads()})
	}
	tc, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: ctx})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}, nil
}

// envoyCluster is the cluster name: the EDS cluster of a Service's port,
// or the cluster without endpoints of backends that do not resolve.
func (t *translation) envoyCluster(name string) (*clusterv3.Cluster, error) {
	k, ok := t.clusters[name]
	if !ok {
		return &clusterv3.Cluster{
			Name:                 name,
			ConnectTimeout:       durationpb.New(connectTimeout),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: name},
		}, nil
	}
	c := &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(connectTimeout),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()},
	}
	if k.http2 {
		opts, err := anypb.New(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
			},
		}})
		if err != nil {
			return nil, err
		}
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": opts}
	}
	return c, nil
}

// tlsSecrets serve the certificates of the valid listeners.
func (t *translation) tlsSecrets(ls []*listener) []examplev1.TLSSecret {
	byName := map[string]examplev1.TLSSecret{}
	for _, l := range ls {
		if !l.valid() {
			continue
		}
		for _, c := range l.certs {
			byName[c.sds] = examplev1.TLSSecret{Name: c.sds, SecretRef: localRef(t.gw.Namespace, c.secret)}
		}
	}
	out := make([]examplev1.TLSSecret, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		out = append(out, byName[name])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
