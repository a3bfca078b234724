package xdstest

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Served is what an Envoy-like client was served, by type URL: the names
// of the resources it holds.
type Served map[string][]string

// EnvoyOrder is the order in which Envoy subscribes on its ADS stream:
// clusters and listeners to all, then what they name.
var EnvoyOrder = []string{resourcev3.ClusterType, resourcev3.ListenerType, resourcev3.EndpointType, resourcev3.RouteType, resourcev3.SecretType}

// Subscriber is a stream that an Envoy-like client drives: ADS or Delta.
type Subscriber interface {
	// subscribe asks for typeURL's names (none: all of it).
	subscribe(typeURL string, names []string) error
	// next receives the next response and accepts it.
	next() (update, error)
}

// update is what one response changes of what a client holds of its type:
// all of it (state of the world), or some (delta).
type update struct {
	typeURL   string
	resources []*anypb.Any
	removed   []string
	full      bool
}

// Subscriber returns the stream as an Envoy-like client drives it.
func (a *ADS) Subscriber() Subscriber { return adsSubscriber{a} }

// Subscriber returns the stream as an Envoy-like client drives it.
func (d *Delta) Subscriber() Subscriber { return deltaSubscriber{d} }

type adsSubscriber struct{ a *ADS }

func (s adsSubscriber) subscribe(typeURL string, names []string) error {
	return s.a.Subscribe(typeURL, names...)
}

func (s adsSubscriber) next() (update, error) {
	resp, err := s.a.Recv()
	if err != nil {
		return update{}, err
	}
	return update{typeURL: resp.GetTypeUrl(), resources: resp.GetResources(), full: true}, s.a.Ack(resp)
}

type deltaSubscriber struct{ d *Delta }

func (s deltaSubscriber) subscribe(typeURL string, names []string) error {
	return s.d.Subscribe(typeURL, names...)
}

func (s deltaSubscriber) next() (update, error) {
	resp, err := s.d.Recv()
	if err != nil {
		return update{}, err
	}
	u := update{typeURL: resp.GetTypeUrl(), removed: resp.GetRemovedResources()}
	for _, r := range resp.GetResources() {
		u.resources = append(u.resources, r.GetResource())
	}
	return u, s.d.Ack(resp)
}

// SubscribeAsEnvoy plays Envoy's subscriptions on a fresh stream, against a
// published fleet: it subscribes to every cluster and every listener, then
// by name to the load assignments of its EDS clusters, to the route
// configurations its listeners name over RDS, and to the secrets its
// listeners and clusters name over SDS, each once it was sent what names
// it, as Envoy does. It accepts every response, and returns what it holds
// once each subscription was answered. A subscription to no name is not
// made.
func SubscribeAsEnvoy(s Subscriber) (Served, error) {
	held := map[string]map[string]*anypb.Any{}
	// answered receives until a response of typeURL came, keeping what
	// each response changes.
	answered := func(typeURL string) error {
		for {
			u, err := s.next()
			if err != nil {
				return fmt.Errorf("waiting for %s: %w", typeURL, err)
			}
			if held[u.typeURL] == nil || u.full {
				held[u.typeURL] = map[string]*anypb.Any{}
			}
			for _, a := range u.resources {
				name, err := nameOf(a)
				if err != nil {
					return err
				}
				held[u.typeURL][name] = a
			}
			for _, name := range u.removed {
				delete(held[u.typeURL], name)
			}
			if u.typeURL == typeURL {
				return nil
			}
		}
	}
	for _, typeURL := range EnvoyOrder[:2] {
		if err := s.subscribe(typeURL, nil); err != nil {
			return nil, err
		}
		if err := answered(typeURL); err != nil {
			return nil, err
		}
	}
	names, err := Named(slices.Collect(maps.Values(held[resourcev3.ClusterType])), slices.Collect(maps.Values(held[resourcev3.ListenerType])))
	if err != nil {
		return nil, err
	}
	for _, typeURL := range EnvoyOrder[2:] {
		if len(names[typeURL]) == 0 {
			continue
		}
		if err := s.subscribe(typeURL, names[typeURL]); err != nil {
			return nil, err
		}
		if err := answered(typeURL); err != nil {
			return nil, err
		}
	}
	served := Served{}
	for typeURL, byName := range held {
		served[typeURL] = slices.Sorted(maps.Keys(byName))
	}
	return served, nil
}

func nameOf(a *anypb.Any) (string, error) {
	names, err := Names([]*anypb.Any{a})
	if err != nil {
		return "", err
	}
	return names[0], nil
}

// Named returns what clusters and listeners (as sent) name, by type: the
// load assignments of EDS clusters, the route configurations of
// HttpConnectionManagers over RDS, and the secrets of TLS contexts over SDS.
func Named(clusters, listeners []*anypb.Any) (map[string][]string, error) {
	set := map[string]map[string]bool{}
	add := func(typeURL, name string) {
		if set[typeURL] == nil {
			set[typeURL] = map[string]bool{}
		}
		set[typeURL][name] = true
	}
	tlsNames := func(ts *corev3.TransportSocket) error {
		if ts.GetTypedConfig() == nil {
			return nil
		}
		m, err := ts.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return err
		}
		var ctx *tlsv3.CommonTlsContext
		switch t := m.(type) {
		case *tlsv3.DownstreamTlsContext:
			ctx = t.GetCommonTlsContext()
		case *tlsv3.UpstreamTlsContext:
			ctx = t.GetCommonTlsContext()
		}
		for _, c := range ctx.GetTlsCertificateSdsSecretConfigs() {
			add(resourcev3.SecretType, c.GetName())
		}
		if c := ctx.GetValidationContextSdsSecretConfig(); c != nil {
			add(resourcev3.SecretType, c.GetName())
		}
		return nil
	}
	for _, a := range clusters {
		c := &clusterv3.Cluster{}
		if err := a.UnmarshalTo(c); err != nil {
			return nil, err
		}
		if c.GetType() == clusterv3.Cluster_EDS {
			name := c.GetName()
			if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
				name = n
			}
			add(resourcev3.EndpointType, name)
		}
		if err := tlsNames(c.GetTransportSocket()); err != nil {
			return nil, err
		}
	}
	hcm := func(a *anypb.Any) error {
		if a == nil || a.GetTypeUrl() != "type.googleapis.com/"+string((&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor().FullName()) {
			return nil
		}
		h := &hcmv3.HttpConnectionManager{}
		if err := a.UnmarshalTo(h); err != nil {
			return err
		}
		if r := h.GetRds(); r != nil {
			add(resourcev3.RouteType, r.GetRouteConfigName())
		}
		return nil
	}
	for _, a := range listeners {
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			return nil, err
		}
		if err := hcm(l.GetApiListener().GetApiListener()); err != nil {
			return nil, err
		}
		for _, fc := range l.GetFilterChains() {
			if err := tlsNames(fc.GetTransportSocket()); err != nil {
				return nil, err
			}
			for _, f := range fc.GetFilters() {
				if err := hcm(f.GetTypedConfig()); err != nil {
					return nil, err
				}
			}
		}
	}
	out := map[string][]string{}
	for typeURL, names := range set {
		for n := range names {
			out[typeURL] = append(out[typeURL], n)
		}
		sort.Strings(out[typeURL])
	}
	return out, nil
}
