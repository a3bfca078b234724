package xdstest

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Served is what an Envoy-like client was served, by type URL: the names
// of the resources it holds.
type Served map[string][]string

// EnvoyOrder is the order in which Envoy subscribes on its ADS stream:
// to all of the kinds it holds all of (resource.Kind.Wildcard: clusters,
// listeners), then by name to the others, which those name, each in the
// order of a push (resource.PushOrder).
var EnvoyOrder, wildcards = envoyOrder(resource.Kinds[:], resource.PushOrder)

// envoyOrder returns the type URLs of kinds, in EnvoyOrder, and how many
// of them are wildcards, at its start. order is the push order of kinds.
func envoyOrder(kinds []resource.Kind, order []int) ([]string, int) {
	var all, byName []string
	for _, i := range order {
		if kinds[i].Wildcard {
			all = append(all, kinds[i].TypeURL)
		} else {
			byName = append(byName, kinds[i].TypeURL)
		}
	}
	return append(all, byName...), len(all)
}

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
// by name to what they name (resource.Subscribed: the load assignments of
// its EDS clusters, the route configurations its listeners name over RDS,
// and the secrets its listeners and clusters name over SDS), each once it
// was sent what names it, as Envoy does. It accepts every response, and returns what it holds
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
	for _, typeURL := range EnvoyOrder[:wildcards] {
		if err := s.subscribe(typeURL, nil); err != nil {
			return nil, err
		}
		if err := answered(typeURL); err != nil {
			return nil, err
		}
	}
	var holding []*anypb.Any
	for _, typeURL := range EnvoyOrder[:wildcards] {
		holding = append(holding, slices.Collect(maps.Values(held[typeURL]))...)
	}
	names, err := Named(holding)
	if err != nil {
		return nil, err
	}
	for _, typeURL := range EnvoyOrder[wildcards:] {
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

// Named returns what resources (as sent, of the kinds Envoy holds all of:
// clusters and listeners) name of the kinds it asks for by name, by type,
// sorted (resource.Subscribed): the load assignments of EDS clusters, the
// route configurations of HttpConnectionManagers over RDS, and the secrets
// of TLS contexts over SDS.
func Named(resources []*anypb.Any) (map[string][]string, error) {
	var ms []types.Resource
	for _, a := range resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	out := resource.Subscribed(ms)
	for _, names := range out {
		sort.Strings(names)
	}
	return out, nil
}
