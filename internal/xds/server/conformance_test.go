package server

import (
	"fmt"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// The resources of the conformance fleets. g, a generation, is part of each
// resource's content: publishing with another g changes every resource,
// and so every type's version.

func listener(name, route string, g int) *listenerv3.Listener {
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: fmt.Sprintf("%s-%d", name, g),
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: route, ConfigSource: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}},
	})
	if err != nil {
		panic(err)
	}
	return &listenerv3.Listener{Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: hcm}}
}

func mustAny(m *routerv3.Router) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func route(name, cluster string, g int) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
		Name: fmt.Sprintf("%s-%d", name, g), Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
		}},
	}}}
}

func cluster(name string, g int) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Duration(g+1) * time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}}}
}

func endpoints(name string, g int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		Locality: &corev3.Locality{Zone: "z1"}, LoadBalancingWeight: nil,
		LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(8000 + g)}}}}}}}},
	}}}
}

func secret(name string, g int) *tlsv3.Secret {
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
		Secret: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: fmt.Sprintf("%s-%d", name, g)}}}}}
}

// fleetOf groups resources by type.
func fleetOf(rs ...types.Resource) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	for _, r := range rs {
		var typ string
		switch r.(type) {
		case *listenerv3.Listener:
			typ = resourcev3.ListenerType
		case *routev3.RouteConfiguration:
			typ = resourcev3.RouteType
		case *clusterv3.Cluster:
			typ = resourcev3.ClusterType
		case *endpointv3.ClusterLoadAssignment:
			typ = resourcev3.EndpointType
		case *tlsv3.Secret:
			typ = resourcev3.SecretType
		}
		out[typ] = append(out[typ], r)
	}
	return out
}

// baseFleet holds more than any of its proxies uses: a route configuration
// no listener names, clusters without routes, a load assignment of no
// cluster, two secrets.
func baseFleet(g int) map[string][]types.Resource {
	return fleetOf(
		listener("l1", "r1", g), listener("l2", "r2", g),
		route("r1", "c1", g), route("r2", "c2", g), route("r-unused", "c1", g),
		cluster("c1", g), cluster("c2", g), cluster("c3", g),
		endpoints("c1", g), endpoints("c2", g), endpoints("c-unused", g),
		secret("s1", g), secret("s2", g))
}

// without returns rs without the resources of type typ named names.
func without(rs map[string][]types.Resource, typ string, names ...string) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	for t, items := range rs {
		for _, r := range items {
			if t != typ || !slices.Contains(names, cachev3.GetResourceName(r)) {
				out[t] = append(out[t], r)
			}
		}
	}
	return out
}

// with returns rs and more.
func with(rs map[string][]types.Resource, more ...types.Resource) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	for t, items := range rs {
		out[t] = append(out[t], items...)
	}
	for t, items := range fleetOf(more...) {
		out[t] = append(out[t], items...)
	}
	return out
}

// conf is one conformance case's server, client and fleet.
type conf struct {
	t *testing.T
	s *Server
	c discoveryv3.AggregatedDiscoveryServiceClient
	n int // publications so far
}

// publish publishes rs as the fleet's next version.
func (c *conf) publish(rs map[string][]types.Resource) string {
	c.t.Helper()
	c.n++
	v := fmt.Sprintf("v%d", c.n)
	mustPublish(c.t, c.s, v, rs)
	return v
}

func (c *conf) version(typ string) string { return c.s.TypeVersion(fleet, typ) }

func (c *conf) sotw(id string) *xdstest.ADS { return xdstest.OpenADS(c.t, c.c, fleet, id) }

func (c *conf) delta(id string) *xdstest.Delta { return xdstest.OpenDelta(c.t, c.c, fleet, id) }

// short names a type in messages.
func short(typ string) string {
	return map[string]string{resourcev3.ListenerType: "LDS", resourcev3.RouteType: "RDS", resourcev3.ClusterType: "CDS",
		resourcev3.EndpointType: "EDS", resourcev3.SecretType: "SDS"}[typ]
}

// expect receives the stream's next response and checks that it is of
// type typ, at the type's current version, with the resources named
// names (sorted); it accepts it and returns it.
func (c *conf) expect(a *xdstest.ADS, typ string, names ...string) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	resp, err := a.Recv()
	if err != nil {
		c.t.Fatalf("waiting for %s %v: %v", short(typ), names, err)
	}
	got, err := xdstest.Names(resp.GetResources())
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.GetTypeUrl() != typ || !slices.Equal(got, names) || resp.GetVersionInfo() != c.version(typ) {
		c.t.Fatalf("got %s %v at %s, want %s %v at %s", short(resp.GetTypeUrl()), got, resp.GetVersionInfo(), short(typ), names, c.version(typ))
	}
	if err := a.Ack(resp); err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// expectDelta receives the stream's next response and checks that it is
// of type typ, at the type's current version, with the resources named
// names and the removals removed (each sorted); it accepts it and returns it.
func (c *conf) expectDelta(d *xdstest.Delta, typ string, names, removed []string) *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	resp, err := d.Recv()
	if err != nil {
		c.t.Fatalf("waiting for %s %v, removed %v: %v", short(typ), names, removed, err)
	}
	got, gone := xdstest.DeltaNames(resp), slices.Sorted(slices.Values(resp.GetRemovedResources()))
	if resp.GetTypeUrl() != typ || !slices.Equal(got, names) || !slices.Equal(gone, removed) || resp.GetSystemVersionInfo() != c.version(typ) {
		c.t.Fatalf("got %s %v removed %v at %s, want %s %v removed %v at %s", short(resp.GetTypeUrl()), got, gone,
			resp.GetSystemVersionInfo(), short(typ), names, removed, c.version(typ))
	}
	if err := d.Ack(resp); err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// barrier returns once the server has handled the stream's requests so
// far: it asks for a secret, and waits for it (requests are handled in
// order). The stream subscribes to secret s1 from then on.
func (c *conf) barrier(a *xdstest.ADS) {
	c.t.Helper()
	must(c.t, a.Subscribe(resourcev3.SecretType, "s1"))
	c.expect(a, resourcev3.SecretType, "s1")
}

// barrierDelta is barrier for a delta stream.
func (c *conf) barrierDelta(d *xdstest.Delta) {
	c.t.Helper()
	must(c.t, d.Subscribe(resourcev3.SecretType, "s1"))
	c.expectDelta(d, resourcev3.SecretType, []string{"s1"}, nil)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The xDS protocol's rules (Envoy's "xDS REST and gRPC protocol"), each a
// case played against the server over mutual TLS, over state of the world
// and over delta. The fleets hold more than the streams ask for, as real
// fleets do. A case shows that nothing was sent where nothing may be by
// what the stream receives next: responses on a stream come in order.
var conformance = []struct {
	name        string
	sotw, delta func(*conf)
}{
	{
		name: "a wildcard subscription gets every resource of its type",
		sotw: func(c *conf) {
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.ListenerType))
			c.expect(a, resourcev3.ListenerType, "l1", "l2")
			must(c.t, a.Subscribe(resourcev3.ClusterType, "*"))
			c.expect(a, resourcev3.ClusterType, "c1", "c2", "c3")
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.ListenerType))
			c.expectDelta(d, resourcev3.ListenerType, []string{"l1", "l2"}, nil)
			must(c.t, d.Subscribe(resourcev3.ClusterType, "*"))
			c.expectDelta(d, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
		},
	},
	{
		name: "a named subscription gets what it names, of every type",
		sotw: func(c *conf) {
			c.publish(baseFleet(0))
			a := c.sotw("p")
			for typ, name := range map[string]string{resourcev3.ListenerType: "l1", resourcev3.RouteType: "r1",
				resourcev3.ClusterType: "c1", resourcev3.EndpointType: "c1", resourcev3.SecretType: "s1"} {
				must(c.t, a.Subscribe(typ, name))
				c.expect(a, typ, name)
			}
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			for typ, name := range map[string]string{resourcev3.ListenerType: "l1", resourcev3.RouteType: "r1",
				resourcev3.ClusterType: "c1", resourcev3.EndpointType: "c1", resourcev3.SecretType: "s1"} {
				must(c.t, d.Subscribe(typ, name))
				c.expectDelta(d, typ, []string{name}, nil)
			}
		},
	},
	{
		name: "wildcard and named subscriptions on one stream, and a wildcard with a name",
		sotw: func(c *conf) {
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.ClusterType, "*", "c1"))
			c.expect(a, resourcev3.ClusterType, "c1", "c2", "c3")
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expect(a, resourcev3.EndpointType, "c1", "c2")
			must(c.t, a.Subscribe(resourcev3.ListenerType))
			c.expect(a, resourcev3.ListenerType, "l1", "l2")
			must(c.t, a.Subscribe(resourcev3.RouteType, "r2"))
			c.expect(a, resourcev3.RouteType, "r2")
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.ClusterType, "*", "c1"))
			c.expectDelta(d, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1", "c2"}, nil)
			must(c.t, d.Subscribe(resourcev3.ListenerType))
			c.expectDelta(d, resourcev3.ListenerType, []string{"l1", "l2"}, nil)
			must(c.t, d.Subscribe(resourcev3.RouteType, "r2"))
			c.expectDelta(d, resourcev3.RouteType, []string{"r2"}, nil)
		},
	},
	{
		name: "subscribing to more names later gets them at once",
		sotw: func(c *conf) {
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1"))
			c.expect(a, resourcev3.EndpointType, "c1")
			// The new request is at the version the stream has: only the
			// new name makes the server answer, with every name asked for.
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expect(a, resourcev3.EndpointType, "c1", "c2")
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1"}, nil)
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c2"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c2"}, nil)
			// A name the stream already holds, subscribed to again, is
			// sent again: the client may have forgotten it.
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1"}, nil)
		},
	},
	{
		name: "an unsubscribed name is sent no more",
		sotw: func(c *conf) {
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expect(a, resourcev3.EndpointType, "c1", "c2")
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1"))
			c.barrier(a)
			c.publish(baseFleet(1))
			c.expect(a, resourcev3.EndpointType, "c1")
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1", "c2"}, nil)
			must(c.t, d.Unsubscribe(resourcev3.EndpointType, "c2"))
			c.barrierDelta(d)
			// c2 changes, then c1: the next response that carries anything
			// carries c1 alone.
			v0 := baseFleet(0)
			c.publish(with(without(v0, resourcev3.EndpointType, "c2"), endpoints("c2", 1)))
			c.publish(with(without(v0, resourcev3.EndpointType, "c1", "c2"), endpoints("c1", 1), endpoints("c2", 1)))
			for {
				resp, err := d.Recv()
				must(c.t, err)
				if got := xdstest.DeltaNames(resp); len(got) > 0 || len(resp.GetRemovedResources()) > 0 {
					if !slices.Equal(got, []string{"c1"}) || len(resp.GetRemovedResources()) > 0 {
						c.t.Fatalf("after unsubscribing from c2: sent %v, removed %v; want c1 alone", got, resp.GetRemovedResources())
					}
					return
				}
				must(c.t, d.Ack(resp))
			}
		},
	},
	{
		name: "a resource removed while subscribed",
		sotw: func(c *conf) {
			// Listeners and clusters: the response without it removes it.
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.ListenerType))
			c.expect(a, resourcev3.ListenerType, "l1", "l2")
			must(c.t, a.Subscribe(resourcev3.ClusterType, "c1", "c2"))
			c.expect(a, resourcev3.ClusterType, "c1", "c2")
			c.publish(without(baseFleet(0), resourcev3.ListenerType, "l2"))
			c.expect(a, resourcev3.ListenerType, "l1")
			c.publish(without(without(baseFleet(0), resourcev3.ListenerType, "l2"), resourcev3.ClusterType, "c2"))
			c.expect(a, resourcev3.ClusterType, "c1")
			// With the last one gone, an empty response removes it.
			c.publish(without(without(baseFleet(0), resourcev3.ListenerType, "l1", "l2"), resourcev3.ClusterType, "c2"))
			c.expect(a, resourcev3.ListenerType)
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.ListenerType))
			c.expectDelta(d, resourcev3.ListenerType, []string{"l1", "l2"}, nil)
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1", "c2"}, nil)
			c.publish(without(baseFleet(0), resourcev3.ListenerType, "l2"))
			c.expectDelta(d, resourcev3.ListenerType, nil, []string{"l2"})
			c.publish(without(without(baseFleet(0), resourcev3.ListenerType, "l2"), resourcev3.EndpointType, "c2"))
			c.expectDelta(d, resourcev3.EndpointType, nil, []string{"c2"})
		},
	},
	{
		name: "ACK, NACK, and a corrected version after a NACK",
		sotw: func(c *conf) {
			v1 := c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.ClusterType))
			c.expect(a, resourcev3.ClusterType, "c1", "c2", "c3")
			waitCounts(c.t, c.s, v1, ProxyCounts{Connected: 1, Acked: 1})
			bad := c.publish(with(baseFleet(0), cluster("bad", 0)))
			resp, err := a.Recv()
			must(c.t, err)
			if resp.GetVersionInfo() != c.version(resourcev3.ClusterType) {
				c.t.Fatalf("got version %s, want %s", resp.GetVersionInfo(), c.version(resourcev3.ClusterType))
			}
			must(c.t, a.Nack(resp, "cluster bad: no"))
			waitCounts(c.t, c.s, bad, ProxyCounts{Connected: 1, Nacked: 1, LastNACK: "cluster bad: no", LastNACKType: resourcev3.ClusterType, LastNACKNode: "p"})
			waitCounts(c.t, c.s, v1, ProxyCounts{Connected: 1, Acked: 1})
			// The rejected version is not sent again: the next response is
			// the corrected one.
			good := c.publish(with(baseFleet(0), cluster("good", 0)))
			c.expect(a, resourcev3.ClusterType, "c1", "c2", "c3", "good")
			waitCounts(c.t, c.s, good, ProxyCounts{Connected: 1, Acked: 1})
		},
		delta: func(c *conf) {
			v1 := c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.ClusterType))
			c.expectDelta(d, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
			waitCounts(c.t, c.s, v1, ProxyCounts{Connected: 1, Acked: 1})
			bad := c.publish(with(baseFleet(0), cluster("bad", 0)))
			resp, err := d.Recv()
			must(c.t, err)
			if got := xdstest.DeltaNames(resp); !slices.Equal(got, []string{"bad"}) {
				c.t.Fatalf("got %v, want the new cluster bad", got)
			}
			must(c.t, d.Nack(resp, "cluster bad: no"))
			waitCounts(c.t, c.s, bad, ProxyCounts{Connected: 1, Nacked: 1, LastNACK: "cluster bad: no", LastNACKType: resourcev3.ClusterType, LastNACKNode: "p"})
			good := c.publish(with(baseFleet(0), cluster("good", 0)))
			c.expectDelta(d, resourcev3.ClusterType, []string{"good"}, []string{"bad"})
			waitCounts(c.t, c.s, good, ProxyCounts{Connected: 1, Acked: 1})
		},
	},
	{
		name: "a reconnecting proxy says what it has",
		sotw: func(c *conf) {
			// State of the world: the request names the version the proxy
			// has; it is sent what it names all the same, since it may
			// name what it was not sent before.
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1"))
			c.expect(a, resourcev3.EndpointType, "c1")
			b := c.sotw("p")
			must(c.t, b.Stream.Send(&discoveryv3.DiscoveryRequest{Node: b.Node, TypeUrl: resourcev3.EndpointType,
				ResourceNames: []string{"c1", "c2"}, VersionInfo: c.version(resourcev3.EndpointType)}))
			resp, err := b.Recv()
			must(c.t, err)
			if got, _ := xdstest.Names(resp.GetResources()); !slices.Equal(got, []string{"c1", "c2"}) {
				c.t.Fatalf("the reconnected stream got %v, want c1 and c2", got)
			}
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.ClusterType))
			first := c.expectDelta(d, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			eds := c.expectDelta(d, resourcev3.EndpointType, []string{"c1", "c2"}, nil)
			had := func(resp *discoveryv3.DeltaDiscoveryResponse) map[string]string {
				m := map[string]string{}
				for _, r := range resp.GetResources() {
					m[r.GetName()] = r.GetVersion()
				}
				return m
			}
			// While it is away, c2 changes and c3 goes.
			c.publish(with(without(baseFleet(0), resourcev3.ClusterType, "c2", "c3"), cluster("c2", 1)))
			r := c.delta("p")
			must(c.t, r.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType, InitialResourceVersions: had(first)}))
			c.expectDelta(r, resourcev3.ClusterType, []string{"c2"}, []string{"c3"})
			must(c.t, r.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType,
				ResourceNamesSubscribe: []string{"c1", "c2"}, InitialResourceVersions: had(eds)}))
			// Its endpoints are as it has them: nothing to send. A change
			// of c1's shows that nothing was.
			c.publish(with(without(without(baseFleet(0), resourcev3.ClusterType, "c2", "c3"), resourcev3.EndpointType, "c1"),
				cluster("c2", 1), endpoints("c1", 1)))
			for {
				resp, err := r.Recv()
				must(c.t, err)
				if resp.GetTypeUrl() != resourcev3.EndpointType || (len(resp.GetResources()) == 0 && len(resp.GetRemovedResources()) == 0) {
					must(c.t, r.Ack(resp))
					continue
				}
				if got := xdstest.DeltaNames(resp); !slices.Equal(got, []string{"c1"}) || len(resp.GetRemovedResources()) > 0 {
					c.t.Fatalf("the reconnected stream got endpoints %v, removed %v; want c1's change alone", got, resp.GetRemovedResources())
				}
				return
			}
		},
	},
	{
		name: "names the fleet does not hold",
		sotw: func(c *conf) {
			// Answered with what exists; sent once it exists.
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1", "ghost"))
			c.expect(a, resourcev3.EndpointType, "c1")
			must(c.t, a.Subscribe(resourcev3.ClusterType, "ghost"))
			c.expect(a, resourcev3.ClusterType)
			c.publish(with(baseFleet(0), endpoints("ghost", 0), cluster("ghost", 0)))
			c.expect(a, resourcev3.ClusterType, "ghost")
			c.expect(a, resourcev3.EndpointType, "c1", "ghost")
		},
		delta: func(c *conf) {
			// Answered as removed; sent once it exists.
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1", "ghost"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1"}, []string{"ghost"})
			must(c.t, d.Subscribe(resourcev3.ClusterType, "ghost"))
			c.expectDelta(d, resourcev3.ClusterType, nil, []string{"ghost"})
			c.publish(with(baseFleet(0), endpoints("ghost", 0), cluster("ghost", 0)))
			c.expectDelta(d, resourcev3.ClusterType, []string{"ghost"}, nil)
			c.expectDelta(d, resourcev3.EndpointType, []string{"ghost"}, nil)
		},
	},
	{
		// The stream names every resource of the fleet: only the order is
		// at stake.
		name: "one push sends clusters, endpoints, listeners, routes, secrets, in this order",
		sotw: func(c *conf) {
			c.publish(baseFleet(0))
			a := c.sotw("p")
			for _, s := range []struct {
				typ   string
				names []string
			}{{resourcev3.ListenerType, nil}, {resourcev3.ClusterType, nil}, {resourcev3.RouteType, []string{"r1", "r2", "r-unused"}},
				{resourcev3.EndpointType, []string{"c1", "c2", "c-unused"}}, {resourcev3.SecretType, []string{"s1", "s2"}}} {
				must(c.t, a.Subscribe(s.typ, s.names...))
				resp, err := a.Recv()
				must(c.t, err)
				must(c.t, a.Ack(resp))
			}
			for g := 1; g <= 5; g++ {
				c.publish(baseFleet(g))
				var order []string
				for range pushOrderForTest {
					resp, err := a.Recv()
					must(c.t, err)
					order = append(order, short(resp.GetTypeUrl()))
					must(c.t, a.Ack(resp))
				}
				if want := shortAll(pushOrderForTest); !slices.Equal(order, want) {
					c.t.Fatalf("push %d came in the order %v, want %v", g, order, want)
				}
			}
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			for _, s := range []struct {
				typ   string
				names []string
			}{{resourcev3.ListenerType, nil}, {resourcev3.ClusterType, nil}, {resourcev3.RouteType, []string{"r1", "r2", "r-unused"}},
				{resourcev3.EndpointType, []string{"c1", "c2", "c-unused"}}, {resourcev3.SecretType, []string{"s1", "s2"}}} {
				must(c.t, d.Subscribe(s.typ, s.names...))
				resp, err := d.Recv()
				must(c.t, err)
				must(c.t, d.Ack(resp))
			}
			for g := 1; g <= 5; g++ {
				c.publish(baseFleet(g))
				var order []string
				for range pushOrderForTest {
					resp, err := d.Recv()
					must(c.t, err)
					order = append(order, short(resp.GetTypeUrl()))
					must(c.t, d.Ack(resp))
				}
				if want := shortAll(pushOrderForTest); !slices.Equal(order, want) {
					c.t.Fatalf("push %d came in the order %v, want %v", g, order, want)
				}
			}
		},
	},
	{
		// The proxy has not answered the last clusters yet when the next
		// push comes: the push's endpoints and listeners wait for them.
		name: "a push waits for a type the proxy has not answered yet",
		sotw: func(c *conf) {
			c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(resourcev3.ClusterType))
			cds, err := a.Recv()
			must(c.t, err)
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1", "c2", "c-unused"))
			c.expect(a, resourcev3.EndpointType, "c-unused", "c1", "c2")
			must(c.t, a.Subscribe(resourcev3.ListenerType))
			c.expect(a, resourcev3.ListenerType, "l1", "l2")
			c.publish(baseFleet(1))
			must(c.t, a.Ack(cds))
			c.expect(a, resourcev3.ClusterType, "c1", "c2", "c3")
			c.expect(a, resourcev3.EndpointType, "c-unused", "c1", "c2")
			c.expect(a, resourcev3.ListenerType, "l1", "l2")
		},
		delta: func(c *conf) {
			c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(resourcev3.ClusterType))
			cds, err := d.Recv()
			must(c.t, err)
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1", "c2"}, nil)
			must(c.t, d.Subscribe(resourcev3.ListenerType))
			c.expectDelta(d, resourcev3.ListenerType, []string{"l1", "l2"}, nil)
			c.publish(baseFleet(1))
			must(c.t, d.Ack(cds))
			c.expectDelta(d, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
			c.expectDelta(d, resourcev3.EndpointType, []string{"c1", "c2"}, nil)
			c.expectDelta(d, resourcev3.ListenerType, []string{"l1", "l2"}, nil)
		},
	},
	{
		// One push points a route at a new cluster. The proxy asks for the
		// new cluster's endpoints only once it has the cluster: the route
		// waits until it was sent them, or the proxy would send requests to
		// a cluster still warming, and fail them.
		name: "a route that names a new cluster waits for the cluster's endpoints",
		sotw: func(c *conf) {
			c.publish(warmFleet("c1"))
			a := c.sotw("p")
			for _, s := range []struct{ typ, name string }{{resourcev3.ClusterType, "c1"}, {resourcev3.EndpointType, "c1"},
				{resourcev3.ListenerType, "l1"}, {resourcev3.RouteType, "r1"}} {
				if s.typ == resourcev3.ClusterType || s.typ == resourcev3.ListenerType {
					must(c.t, a.Subscribe(s.typ))
				} else {
					must(c.t, a.Subscribe(s.typ, s.name))
				}
				c.expect(a, s.typ, s.name)
			}
			c.publish(warmFleet("c2", "c1"))
			c.expect(a, resourcev3.ClusterType, "c1", "c2")
			// The endpoints' version changed: the stream is sent what it asks for at it.
			c.expect(a, resourcev3.EndpointType, "c1")
			must(c.t, a.Subscribe(resourcev3.EndpointType, "c1", "c2"))
			c.expect(a, resourcev3.EndpointType, "c1", "c2")
			c.expect(a, resourcev3.RouteType, "r1")
		},
		delta: func(c *conf) {
			c.publish(warmFleet("c1"))
			d := c.delta("p")
			for _, s := range []struct{ typ, name string }{{resourcev3.ClusterType, "c1"}, {resourcev3.EndpointType, "c1"},
				{resourcev3.ListenerType, "l1"}, {resourcev3.RouteType, "r1"}} {
				if s.typ == resourcev3.ClusterType || s.typ == resourcev3.ListenerType {
					must(c.t, d.Subscribe(s.typ))
				} else {
					must(c.t, d.Subscribe(s.typ, s.name))
				}
				c.expectDelta(d, s.typ, []string{s.name}, nil)
			}
			c.publish(warmFleet("c2", "c1"))
			c.expectDelta(d, resourcev3.ClusterType, []string{"c2"}, nil)
			// The endpoints' version changed, c1's did not: the stream is told the version.
			c.expectDelta(d, resourcev3.EndpointType, nil, nil)
			must(c.t, d.Subscribe(resourcev3.EndpointType, "c2"))
			c.expectDelta(d, resourcev3.EndpointType, []string{"c2"}, nil)
			c.expectDelta(d, resourcev3.RouteType, []string{"r1"}, nil)
		},
	},
	{
		// A proxy may ask for a type the server does not serve: an HTTP
		// filter's configuration by extension config discovery, scoped
		// routes. It is sent nothing of it, and its other subscriptions go
		// on: their answers, and the next push. The stream's first request,
		// which carries the node, is of such a type; the proxy counts as
		// having accepted what it is served.
		name: "a type the server does not serve is left unanswered, and the stream goes on",
		sotw: func(c *conf) {
			v1 := c.publish(baseFleet(0))
			a := c.sotw("p")
			must(c.t, a.Subscribe(extensionConfigType, "filter"))
			must(c.t, a.Subscribe(resourcev3.ClusterType))
			c.expect(a, resourcev3.ClusterType, "c1", "c2", "c3")
			must(c.t, a.Subscribe(scopedRouteType))
			must(c.t, a.Subscribe(resourcev3.ListenerType))
			c.expect(a, resourcev3.ListenerType, "l1", "l2")
			waitCounts(c.t, c.s, v1, ProxyCounts{Connected: 1, Acked: 1})
			// A new name of the type, then a push.
			must(c.t, a.Subscribe(extensionConfigType, "filter", "other"))
			v2 := c.publish(baseFleet(1))
			c.expect(a, resourcev3.ClusterType, "c1", "c2", "c3")
			c.expect(a, resourcev3.ListenerType, "l1", "l2")
			c.barrier(a)
			waitCounts(c.t, c.s, v2, ProxyCounts{Connected: 1, Acked: 1})
		},
		delta: func(c *conf) {
			v1 := c.publish(baseFleet(0))
			d := c.delta("p")
			must(c.t, d.Subscribe(extensionConfigType, "filter"))
			must(c.t, d.Subscribe(resourcev3.ClusterType))
			c.expectDelta(d, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
			must(c.t, d.Subscribe(scopedRouteType))
			must(c.t, d.Subscribe(resourcev3.ListenerType))
			c.expectDelta(d, resourcev3.ListenerType, []string{"l1", "l2"}, nil)
			waitCounts(c.t, c.s, v1, ProxyCounts{Connected: 1, Acked: 1})
			must(c.t, d.Subscribe(extensionConfigType, "other"))
			must(c.t, d.Unsubscribe(extensionConfigType, "filter"))
			v2 := c.publish(baseFleet(1))
			c.expectDelta(d, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
			c.expectDelta(d, resourcev3.ListenerType, []string{"l1", "l2"}, nil)
			c.barrierDelta(d)
			waitCounts(c.t, c.s, v2, ProxyCounts{Connected: 1, Acked: 1})
		},
	}}

// warmFleet is a listener l1 whose route r1 names the cluster target, and
// the clusters target and also with their endpoints.
func warmFleet(target string, also ...string) map[string][]types.Resource {
	rs := []types.Resource{listener("l1", "r1", 0), route("r1", target, 0)}
	for _, name := range append([]string{target}, also...) {
		rs = append(rs, cluster(name, 0), endpoints(name, 0))
	}
	return fleetOf(rs...)
}

// Types Envoy may ask for over ADS that the server does not serve.
const (
	extensionConfigType = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
	scopedRouteType     = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
)

// pushOrderForTest is the order of resource.PushOrder, by type URL: the
// one the protocol's make-before-break asks for (a cluster before its
// endpoints, both before the listener that uses them, the listener before
// its routes; secrets last), which package resource's TestKinds pins.
var pushOrderForTest = func() []string {
	var out []string
	for _, kind := range resource.PushOrder {
		out = append(out, resource.Kinds[kind].TypeURL)
	}
	return out
}()

func shortAll(typs []string) []string {
	out := make([]string, len(typs))
	for i, t := range typs {
		out[i] = short(t)
	}
	return out
}

func TestConformance(t *testing.T) {
	for _, tc := range conformance {
		for _, proto := range []string{"sotw", "delta"} {
			run := tc.sotw
			if proto == "delta" {
				run = tc.delta
			}
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				a := newAuthority(t)
				s, addr := startTLSServer(t, a)
				run(&conf{t: t, s: s, c: dialAs(t, addr, a, "ns", "edge")})
			})
		}
	}
}
