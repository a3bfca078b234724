package translate

import (
	"cmp"
	"errors"
	"fmt"
	"sort"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

type resourceKey struct{ typeURL, name string }

// merge keeps, for every type and name, the resource of a Gateway's
// Config over an EnvoyConfig's, and otherwise the resource of the oldest
// config (by name when two are as old).
func merge(configs []parsed) (map[resourceKey]resource.Resource, map[string][]string) {
	sorted := append([]parsed(nil), configs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if gi, gj := IsGatewayConfig(sorted[i].name), IsGatewayConfig(sorted[j].name); gi != gj {
			return gi
		}
		if !sorted[i].created.Equal(sorted[j].created) {
			return sorted[i].created.Before(sorted[j].created)
		}
		return sorted[i].name < sorted[j].name
	})
	winners := map[resourceKey]resource.Resource{}
	clashes := map[string][]string{}
	for _, c := range sorted {
		for _, r := range c.resources {
			key := resourceKey{r.Kind.TypeURL, r.Name}
			if w, taken := winners[key]; taken {
				if w.Source != r.Source {
					what := fmt.Sprintf("%s %q", r.Kind.Noun, r.Name)
					lost, won := "which is older and wins", "this one is older and is served"
					if IsGatewayConfig(w.Source) && !IsGatewayConfig(r.Source) {
						lost, won = "whose resources win over every EnvoyConfig's", "the Gateway's is served"
					}
					clashes[r.Source] = append(clashes[r.Source],
						fmt.Sprintf("%s (%s) is also defined by %s, %s", what, r.Path, SourceOf(w.Source), lost))
					clashes[w.Source] = append(clashes[w.Source],
						fmt.Sprintf("%s (%s) is also defined by %s; %s", what, w.Path, SourceOf(r.Source), won))
				}
				continue
			}
			winners[key] = r
		}
	}
	return winners, clashes
}

// GatewayConfigMark marks the name of a Gateway's Config (xds/gateway): it
// is "<namespace>/gateway:<name>", which no EnvoyConfig can be named, since
// ':' is not allowed in an object's name. A Gateway's Config wins every
// conflict with an EnvoyConfig of its fleet: a resource of the same name,
// a listener on the same address. The name is recorded with the content,
// so every replica renders a revision by the same rule.
const GatewayConfigMark = "gateway:"

// gatewayPrefix is what the names of the resources of the Gateway whose
// Config is named name start with: "<namespace>/<gateway>/" (xds/gateway
// names them so).
func gatewayPrefix(name string) string {
	ns, rest, _ := strings.Cut(name, "/")
	return ns + "/" + strings.TrimPrefix(rest, GatewayConfigMark) + "/"
}

// IsGatewayConfig reports whether name, a Config's, is a Gateway's.
func IsGatewayConfig(name string) bool {
	_, rest, ok := strings.Cut(name, "/")
	return ok && strings.HasPrefix(rest, GatewayConfigMark)
}

// SourceOf names the object a Config comes from, as messages name it:
// "Gateway <namespace>/<name>" for a Gateway's, "EnvoyConfig
// <namespace>/<name>" for an EnvoyConfig.
func SourceOf(name string) string {
	if IsGatewayConfig(name) {
		return "Gateway " + strings.TrimSuffix(gatewayPrefix(name), "/")
	}
	return "EnvoyConfig " + name
}

func byType(merged map[resourceKey]resource.Resource) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	keys := make([]resourceKey, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].typeURL != keys[j].typeURL {
			return keys[i].typeURL < keys[j].typeURL
		}
		return keys[i].name < keys[j].name
	})
	for _, k := range keys {
		if m := merged[k].Message; m != nil { // a declared secret whose Secret serves none
			out[k.typeURL] = append(out[k.typeURL], m)
		}
	}
	return out
}

// checkReferences returns, by config name, the references that lead nowhere:
// a listener's route configuration (RDS) that no config defines, a cluster
// named by a route or a TCP proxy that no config defines, and a secret that
// a listener or a cluster asks this server for over SDS and that no config
// defines, inline or in spec.tlsSecrets.
func checkReferences(merged map[resourceKey]resource.Resource) map[string][]error {
	has := func(typeURL, name string) bool { _, ok := merged[resourceKey{typeURL, name}]; return ok }
	// The Gateways of the fleet, by the prefix of their resources' names.
	gateways := map[string]string{}
	for _, r := range merged {
		if IsGatewayConfig(r.Source) {
			gateways[gatewayPrefix(r.Source)] = r.Source
		}
	}
	problems := map[string][]error{}
	report := func(r resource.Resource, kind, name string) {
		msg := fmt.Sprintf("%s (%q): %s %q does not exist", r.Path, r.Name, kind, name)
		for prefix, gw := range gateways {
			if strings.HasPrefix(name, prefix) && !IsGatewayConfig(r.Source) {
				msg += fmt.Sprintf(": %s does not serve it (a Gateway's resources go with its routes, and its changes win over the EnvoyConfigs that use them)", SourceOf(gw))
			}
		}
		problems[r.Source] = append(problems[r.Source], errors.New(msg))
	}
	checkClusters := func(r resource.Resource, clusters []string) {
		for _, c := range clusters {
			if !has(resourcev3.ClusterType, c) {
				report(r, "cluster", c)
			}
		}
	}
	checkSecrets := func(r resource.Resource) {
		for _, s := range sdsReferences(r.Message) {
			if !has(resourcev3.SecretType, s) {
				report(r, "secret", s)
			}
		}
	}
	for _, r := range sortedResources(merged) {
		switch m := r.Message.(type) {
		case *listenerv3.Listener:
			checkSecrets(r)
			for _, hcm := range connectionManagers(m) {
				if rds := hcm.GetRds(); rds != nil && !has(resourcev3.RouteType, rds.GetRouteConfigName()) {
					report(r, "route configuration", rds.GetRouteConfigName())
				}
				checkClusters(r, routeClusters(hcm.GetRouteConfig()))
				checkClusters(r, tracerClusters(hcm))
			}
			checkClusters(r, tcpProxyClusters(m))
		case *routev3.RouteConfiguration:
			checkClusters(r, routeClusters(m))
		case *clusterv3.Cluster:
			// EDS clusters may wait for their endpoints: only secrets to check.
			checkSecrets(r)
		}
	}
	return problems
}

func sortedResources(merged map[resourceKey]resource.Resource) []resource.Resource {
	out := make([]resource.Resource, 0, len(merged))
	for _, r := range merged {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Source < out[j].Path+out[j].Source })
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
	for _, fc := range filterChains(l) {
		for _, f := range fc.GetFilters() {
			add(f.GetTypedConfig())
		}
	}
	add(l.GetApiListener().GetApiListener())
	return out
}

func filterChains(l *listenerv3.Listener) []*listenerv3.FilterChain {
	chains := append([]*listenerv3.FilterChain(nil), l.GetFilterChains()...)
	if l.GetDefaultFilterChain() != nil {
		chains = append(chains, l.GetDefaultFilterChain())
	}
	return chains
}

func tcpProxyClusters(l *listenerv3.Listener) []string {
	var out []string
	for _, fc := range filterChains(l) {
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
