package resource

import (
	"cmp"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Reference is a name that a resource gives of another resource of its
// fleet, one of the kind of TypeURL.
type Reference struct {
	TypeURL string
	Name    string
	// Warming: Envoy builds the resource that gives the name and holds it
	// warming until the one named comes (an EDS cluster its endpoints),
	// so the name may lead nowhere for a while; every other name must lead
	// to a resource of the fleet, and translate refuses one that does not.
	// What names a warming resource waits until it is warm (the server
	// sends a cluster's endpoints before a route that uses it).
	Warming bool
}

// References returns the names m, a resource of one of Kinds, gives of
// other resources of its fleet (its kind's References), in the order it
// gives them; nil for a message of no kind.
func References(m types.Resource) []Reference {
	for _, k := range Kinds {
		if k.newMsg != nil && proto.MessageName(k.newMsg()) == proto.MessageName(m) {
			return k.refs(m)
		}
	}
	return nil
}

// Subscribed returns, by type, the names that resources (each of a
// Wildcard kind, which a proxy holds all of) name of the kinds a proxy
// asks for by name: what it asks for once it holds them.
func Subscribed(resources []types.Resource) map[string][]string {
	out := map[string][]string{}
	seen := map[Reference]bool{}
	for _, m := range resources {
		for _, ref := range References(m) {
			key := Reference{TypeURL: ref.TypeURL, Name: ref.Name}
			if KindOf(ref.TypeURL).Wildcard || seen[key] {
				continue
			}
			seen[key] = true
			out[ref.TypeURL] = append(out[ref.TypeURL], ref.Name)
		}
	}
	return out
}

// listenerReferences: a listener names its secrets, the route
// configurations of its connection managers over RDS, and the clusters
// their inline route configurations, tracers and its TCP proxies send to.
func listenerReferences(m types.Resource) []Reference {
	l := m.(*listenerv3.Listener)
	out := secretReferences(l)
	for _, hcm := range connectionManagers(l) {
		if rds := hcm.GetRds(); rds != nil {
			out = append(out, Reference{TypeURL: resourcev3.RouteType, Name: rds.GetRouteConfigName()})
		}
		out = clusterReferences(out, routeClusters(hcm.GetRouteConfig()))
		out = clusterReferences(out, tracerClusters(hcm))
	}
	return clusterReferences(out, tcpProxyClusters(l))
}

// routeReferences: a route configuration names the clusters its routes
// send to.
func routeReferences(m types.Resource) []Reference {
	return clusterReferences(nil, routeClusters(m.(*routev3.RouteConfiguration)))
}

// clusterReferencesOf: a cluster names its endpoints when it takes them
// over EDS (by its EDS service name, or its own), which it warms until they
// come, and its secrets.
func clusterReferencesOf(m types.Resource) []Reference {
	c := m.(*clusterv3.Cluster)
	var out []Reference
	if c.GetType() == clusterv3.Cluster_EDS {
		out = append(out, Reference{TypeURL: resourcev3.EndpointType, Name: cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName()),
			Warming: true})
	}
	return append(out, secretReferences(c)...)
}

// noReferences: the kind names no other resource.
func noReferences(types.Resource) []Reference { return nil }

func clusterReferences(out []Reference, clusters []string) []Reference {
	for _, c := range clusters {
		out = append(out, Reference{TypeURL: resourcev3.ClusterType, Name: c})
	}
	return out
}

// secretReferences returns the secrets that m asks this server for over
// SDS, at any depth.
func secretReferences(m proto.Message) []Reference {
	var out []Reference
	for _, s := range sdsReferences(m) {
		out = append(out, Reference{TypeURL: resourcev3.SecretType, Name: s})
	}
	return out
}

// sdsFromThisServer reports whether an SDS secret config asks this server:
// over ADS, or from the source that delivered the resource naming it.
// Without a config source, the secret is one of the bootstrap's static
// secrets; with another one, another server's.
func sdsFromThisServer(c *tlsv3.SdsSecretConfig) bool {
	src := c.GetSdsConfig()
	return src.GetAds() != nil || src.GetSelf() != nil
}

// sdsReferences returns the names of the secrets that m (a listener or a
// cluster) asks this server for over SDS, at any depth.
func sdsReferences(m proto.Message) []string {
	var out []string
	Walk(m, "", func(m proto.Message, _ string) bool {
		if c, ok := m.(*tlsv3.SdsSecretConfig); ok {
			if sdsFromThisServer(c) {
				out = append(out, c.GetName())
			}
			return false
		}
		return true
	})
	return out
}

// tracerClusters returns the clusters a connection manager's tracer sends
// spans to: Envoy refuses the listener when one is not there ("unknown
// cluster 'x'").
func tracerClusters(hcm *hcmv3.HttpConnectionManager) []string {
	a := hcm.GetTracing().GetProvider().GetTypedConfig()
	z, d := &tracev3.ZipkinConfig{}, &tracev3.DatadogConfig{}
	switch {
	case a == nil:
	case a.MessageIs(z) && a.UnmarshalTo(z) == nil:
		if c := cmp.Or(z.GetCollectorService().GetHttpUri().GetCluster(), z.GetCollectorCluster()); c != "" {
			return []string{c}
		}
	case a.MessageIs(d) && a.UnmarshalTo(d) == nil && d.GetCollectorCluster() != "":
		return []string{d.GetCollectorCluster()}
	}
	return nil
}

// connectionManagers returns the HTTP connection managers of a listener:
// those of its filter chains, and its API listener's (proxyless gRPC).
func connectionManagers(l *listenerv3.Listener) []*hcmv3.HttpConnectionManager {
	var out []*hcmv3.HttpConnectionManager
	add := func(a *anypb.Any) {
		hcm := &hcmv3.HttpConnectionManager{}
		if a != nil && a.MessageIs(hcm) && a.UnmarshalTo(hcm) == nil {
			out = append(out, hcm)
		}
	}
	for _, fc := range allFilterChains(l) {
		for _, f := range fc.GetFilters() {
			add(f.GetTypedConfig())
		}
	}
	add(l.GetApiListener().GetApiListener())
	return out
}

// allFilterChains returns a listener's filter chains and its default one.
func allFilterChains(l *listenerv3.Listener) []*listenerv3.FilterChain {
	chains := append([]*listenerv3.FilterChain(nil), l.GetFilterChains()...)
	if l.GetDefaultFilterChain() != nil {
		chains = append(chains, l.GetDefaultFilterChain())
	}
	return chains
}

func tcpProxyClusters(l *listenerv3.Listener) []string {
	var out []string
	for _, fc := range allFilterChains(l) {
		for _, f := range fc.GetFilters() {
			tp := &tcpproxyv3.TcpProxy{}
			if a := f.GetTypedConfig(); a != nil && a.MessageIs(tp) && a.UnmarshalTo(tp) == nil {
				if c := tp.GetCluster(); c != "" {
					out = append(out, c)
				}
				for _, w := range tp.GetWeightedClusters().GetClusters() {
					out = append(out, w.GetName())
				}
			}
		}
	}
	return out
}

// routeClusters returns the clusters a route configuration sends traffic to.
func routeClusters(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a := r.GetRoute()
			if c := a.GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, w := range a.GetWeightedClusters().GetClusters() {
				out = append(out, w.GetName())
			}
			for _, m := range a.GetRequestMirrorPolicies() {
				if m.GetCluster() != "" {
					out = append(out, m.GetCluster())
				}
			}
		}
	}
	return out
}
