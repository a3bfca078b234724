package cache

import (
	"context"
	"slices"
	"sort"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// What a stream is sent, by the rules of Envoy's "xDS REST and gRPC
// protocol", for the resources of one type that its fleet serves:
//
//   - a wildcard subscription gets every resource of the type; a named one,
//     the resources it names that exist (and a wildcard with names, all);
//   - state of the world: a stream that is not at the type's version gets
//     the whole of what it subscribes to, at that version. Listeners and
//     clusters that are not in it are removed by the proxy; for the other
//     types a response without a resource changes nothing. A stream at the
//     type's version is answered only when it subscribed to a resource that
//     exists and that it was not sent (a name it adds, or a wildcard). A name
//     the fleet does not hold is left out: the protocol has no other way to
//     say so, and the proxy gives up on it after a timeout (15 seconds for
//     Envoy and gRPC); once it exists, the type's new version brings it;
//   - delta: a stream gets the resources whose version it does not have,
//     and, in removed_resources, the names it holds or subscribes to that
//     the fleet does not hold (each once). A name it subscribes to again is
//     sent again: the protocol says the client may have forgotten it. A
//     reconnecting stream's initial_resource_versions say what it has;
//   - either way, every new version of a type reaches every stream that
//     subscribes to the type, even when nothing it subscribes to changed (an
//     empty delta response): so its answer says where it stands with the
//     fleet's new version, and the tracker counts it.
//
// These functions only compute; the cache (Cache) sends.

// The marks a response leaves in the client's state that the server
// keeps for the next request of the type (go-control-plane's Subscription,
// whose returned resources are each response's GetReturnedResources):
const (
	// wildcardSent, in a state-of-the-world stream's returned resources:
	// the last response carried every resource of the type at that version.
	// go-control-plane drops it when the stream subscribes by name.
	wildcardSent = "*"
	// typeVersionKey, in a delta stream's returned resources, maps to the
	// type's version of the last response: it stays with the stream's
	// subscription. Resource names are never empty (a request that names
	// "" is refused).
	typeVersionKey = ""
	// toldAbsent, as a delta stream's version of a name, says that the
	// stream was told it does not exist.
	toldAbsent = "\x00absent"
)

// sotwResponse is a state-of-the-world response (cachev3.Response).
type sotwResponse struct {
	req       *discoveryv3.DiscoveryRequest
	version   string
	resources []*anypb.Any
	returned  map[string]string
}

var _ cachev3.Response = (*sotwResponse)(nil)

// GetDiscoveryResponse returns a new message each time: the server sets its nonce.
func (r *sotwResponse) GetDiscoveryResponse() (*discoveryv3.DiscoveryResponse, error) {
	return &discoveryv3.DiscoveryResponse{VersionInfo: r.version, Resources: r.resources, TypeUrl: r.req.GetTypeUrl()}, nil
}

func (r *sotwResponse) GetRequest() *discoveryv3.DiscoveryRequest { return r.req }
func (r *sotwResponse) GetVersion() (string, error)               { return r.version, nil }
func (r *sotwResponse) GetResponseVersion() string                { return r.version }
func (r *sotwResponse) GetReturnedResources() map[string]string   { return r.returned }
func (r *sotwResponse) GetContext() context.Context               { return context.Background() }

// answerSotw returns what a state-of-the-world watch of t's type is sent
// now, or nil when it waits.
func answerSotw(t *typeSnapshot, req *discoveryv3.DiscoveryRequest, sub cachev3.Subscription) *sotwResponse {
	returned := sub.ReturnedResources()
	if req.GetVersionInfo() == t.version {
		if sub.IsWildcard() {
			if _, ok := returned[wildcardSent]; ok {
				return nil
			}
		} else if !sendsNew(t, sub.SubscribedResources(), returned) {
			return nil
		}
	}
	resp := &sotwResponse{req: req, version: t.version}
	if sub.IsWildcard() {
		resp.resources, resp.returned = t.all, map[string]string{wildcardSent: t.version}
		return resp
	}
	names := make([]string, 0, len(sub.SubscribedResources()))
	for name := range sub.SubscribedResources() {
		if _, ok := t.byName[name]; ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	resp.resources, resp.returned = make([]*anypb.Any, len(names)), make(map[string]string, len(names))
	for i, name := range names {
		resp.resources[i] = t.byName[name].any
		resp.returned[name] = t.version
	}
	return resp
}

// sendsNew reports whether a resource of subscribed exists that was not returned.
func sendsNew(t *typeSnapshot, subscribed map[string]struct{}, returned map[string]string) bool {
	for name := range subscribed {
		if _, ok := t.byName[name]; ok {
			if _, sent := returned[name]; !sent {
				return true
			}
		}
	}
	return false
}

// deltaResponse is a delta response (cachev3.DeltaResponse).
type deltaResponse struct {
	req       *discoveryv3.DeltaDiscoveryRequest
	version   string
	resources []*discoveryv3.Resource
	removed   []string
	returned  map[string]string
}

var _ cachev3.DeltaResponse = (*deltaResponse)(nil)

// GetDeltaDiscoveryResponse returns a new message each time: the server sets its nonce.
func (r *deltaResponse) GetDeltaDiscoveryResponse() (*discoveryv3.DeltaDiscoveryResponse, error) {
	return &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: r.version, Resources: r.resources,
		RemovedResources: r.removed, TypeUrl: r.req.GetTypeUrl()}, nil
}

func (r *deltaResponse) GetDeltaRequest() *discoveryv3.DeltaDiscoveryRequest { return r.req }
func (r *deltaResponse) GetSystemVersion() (string, error)                   { return r.version, nil }
func (r *deltaResponse) GetResponseVersion() string                          { return r.version }
func (r *deltaResponse) GetNextVersionMap() map[string]string                { return r.returned }
func (r *deltaResponse) GetReturnedResources() map[string]string             { return r.returned }
func (r *deltaResponse) GetContext() context.Context                         { return context.Background() }

// answerDelta returns what a delta watch of t's type is sent now, or nil
// when it waits.
func answerDelta(t *typeSnapshot, req *discoveryv3.DeltaDiscoveryRequest, sub cachev3.Subscription) *deltaResponse {
	returned := sub.ReturnedResources()
	subscribed := sub.SubscribedResources()
	again := sentAgain(req)
	// Most watches are a proxy's ACK of the response it was just sent: they
	// wait. Finding that out reads the stream's state and writes nothing.
	if returned[typeVersionKey] == t.version && !deltaChanges(t, sub.IsWildcard(), subscribed, returned, again) {
		return nil
	}
	resp := &deltaResponse{req: req, version: t.version, returned: make(map[string]string, len(subscribed)+1)}
	send := func(e *encodedResource) {
		resp.returned[e.name] = e.version
		if deltaSends(e, returned, again) {
			resp.resources = append(resp.resources, e.delta)
		}
	}
	absent := func(name string) {
		resp.returned[name] = toldAbsent
		if returned[name] != toldAbsent {
			resp.removed = append(resp.removed, name)
		}
	}
	if sub.IsWildcard() {
		for _, e := range t.sorted {
			send(e)
		}
		for name := range subscribed {
			if _, ok := t.byName[name]; !ok {
				absent(name)
			}
		}
		// What the stream had and the fleet no longer holds (or a name it
		// unsubscribed from, which go-control-plane marks with no version:
		// the wildcard may or may not still hold it) is removed.
		for name, v := range returned {
			if _, ok := resp.returned[name]; !ok && name != typeVersionKey && v != toldAbsent {
				resp.removed = append(resp.removed, name)
			}
		}
	} else {
		for name := range subscribed {
			if e, ok := t.byName[name]; ok {
				send(e)
			} else {
				absent(name)
			}
		}
		// In the order of their names, as a wildcard's: only what is sent
		// is sorted, not every name the stream subscribes to.
		slices.SortFunc(resp.resources, func(a, b *discoveryv3.Resource) int { return strings.Compare(a.GetName(), b.GetName()) })
	}
	resp.returned[typeVersionKey] = t.version
	if len(resp.resources) == 0 && len(resp.removed) == 0 && returned[typeVersionKey] == t.version {
		return nil
	}
	sort.Strings(resp.removed)
	return resp
}

// sentAgain returns which names the request has sent again: those it
// subscribes to, unless the request itself says which version the stream
// has (a reconnection).
func sentAgain(req *discoveryv3.DeltaDiscoveryRequest) func(name string) bool {
	names := req.GetResourceNamesSubscribe()
	if len(names) == 0 {
		return func(string) bool { return false }
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		if _, known := req.GetInitialResourceVersions()[n]; !known {
			set[n] = true
		}
	}
	return func(name string) bool { return set[name] }
}

// deltaSends reports whether e is sent to a stream that was sent returned.
func deltaSends(e *encodedResource, returned map[string]string, again func(string) bool) bool {
	v, ok := returned[e.name]
	return !ok || v != e.version || again(e.name)
}

// deltaChanges reports whether answerDelta would send a resource or remove
// a name: the same rules, without building the response.
func deltaChanges(t *typeSnapshot, wildcard bool, subscribed map[string]struct{}, returned map[string]string, again func(string) bool) bool {
	for name := range subscribed {
		if e, ok := t.byName[name]; ok {
			if deltaSends(e, returned, again) {
				return true
			}
		} else if returned[name] != toldAbsent {
			return true
		}
	}
	if !wildcard {
		return false
	}
	for _, e := range t.sorted {
		if deltaSends(e, returned, again) {
			return true
		}
	}
	for name, v := range returned {
		if _, has := t.byName[name]; has || name == typeVersionKey || v == toldAbsent {
			continue
		}
		if _, named := subscribed[name]; !named {
			return true
		}
	}
	return false
}
