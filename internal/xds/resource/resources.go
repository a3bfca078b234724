// Package resource is the vocabulary of the control plane, below every
// stage: the kinds of Envoy v3 resources an EnvoyConfig may hold (Kinds),
// how one is decoded from its YAML or JSON and checked as Envoy would load it
// (Parse, Decode, the rules of envoyrules.go), the content hash that
// versions what is served (Version, Hash), and the walk over a resource and
// everything nested in it (Walk). It takes bytes and messages and gives
// messages, findings and versions.
//
// Its invariant: everything here is pure, and links no ADS server and
// registers no metric (tested in package xds), so that translate, publish,
// the admission webhook and kubectl envoy use it without the ADS runtime.
package resource

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// Kind is one type of xDS resource that an EnvoyConfig may hold, and
// everything the operator knows of it. A new type is one field of
// examplev1.EnvoyResources and one entry of Kinds: the rest (reading an
// EnvoyConfig, Envoy's load-time rules, the references that must lead
// somewhere, the fleet's ceiling, the policy's destinations, a load check
// in a real Envoy, the order of a push, the types the server serves,
// kubectl envoy's columns, the subscriptions of the stand-in proxies and
// of the tests' Envoy-like clients) is derived from Kinds,
// and TestKinds fails on an entry that lacks a fact.
type Kind struct {
	// Field is the list's name in spec.resources: the JSON name of its
	// field of examplev1.EnvoyResources.
	Field string
	// TypeURL is the xDS type of the resource.
	TypeURL string
	// Noun names one resource of the kind in messages, e.g. "route
	// configuration".
	Noun string
	// Short is the name of the type's discovery service (LDS, RDS, CDS,
	// EDS, SDS), e.g. a column of kubectl envoy proxies.
	Short string
	// Rank is the kind's place in the order a push sends the types, from
	// 0, as the protocol's make-before-break asks (PushOrder).
	Rank int
	// ByName: a proxy asks for the resources by name only, never for all
	// of them (a wildcard), which the server refuses.
	ByName bool
	// Wildcard: a proxy asks for all the resources of the kind (a
	// state-of-the-world request that names none asks for all, even after
	// one that named some), and for those of the other kinds by the names
	// these give (References, Subscribed).
	Wildcard bool
	// Destinations: the socket addresses of a resource of the kind are
	// where a proxy connects to (a cluster's, its endpoints'), not where
	// it listens, and the policy's rules of destinations apply to them.
	Destinations bool
	// FleetCeiling is how many resources of the kind a fleet holds at
	// most, unless the operator's bounds say otherwise (fleet.<Field>).
	FleetCeiling int64
	// Static is where a load check (package envoyload) puts a resource of
	// the kind for a real Envoy to build: the path of a list of Envoy's
	// bootstrap, e.g. static_resources.clusters. `envoy --mode validate`
	// builds only what the bootstrap holds.
	Static string
	// AsStatic returns res, a resource of the kind in JSON with Envoy's
	// field names, decoded, as it goes into Static so that Envoy builds it
	// as it builds the resource that comes over xDS; i is its index among
	// its kind's resources, for the names of what it adds (which start
	// with "envoyload/"). Nil: as it is.
	AsStatic func(res map[string]any, i int) map[string]any
	// List returns the kind's list of an EnvoyConfig's resources, the
	// field Field of res, to read or to replace.
	List func(res *examplev1.EnvoyResources) *[]runtime.RawExtension

	newMsg func() types.Resource
	name   func(types.Resource) string
	// check applies Envoy's load-time rules of the kind (envoyrules.go)
	// to a resource of the kind.
	check func(f *findings, m types.Resource)
	// refs returns the names a resource of the kind gives of other
	// resources (References).
	refs func(types.Resource) []Reference
}

// Kinds lists the kinds of spec.resources, in the order they are read.
// It is an array, so that the server sizes its arrays of types by it.
var Kinds = [...]Kind{{
	Field: "listeners", TypeURL: resourcev3.ListenerType, Noun: "listener", Short: "LDS", Rank: 2, Wildcard: true,
	FleetCeiling: 1000, Static: "static_resources.listeners",
	List:   func(r *examplev1.EnvoyResources) *[]runtime.RawExtension { return &r.Listeners },
	newMsg: func() types.Resource { return &listenerv3.Listener{} },
	name:   func(r types.Resource) string { return r.(*listenerv3.Listener).GetName() },
	check:  checkListenerLoad, refs: listenerReferences,
}, {
	Field: "routes", TypeURL: resourcev3.RouteType, Noun: "route configuration", Short: "RDS", Rank: 3,
	FleetCeiling: 2000, Static: "static_resources.listeners", AsStatic: routesAsStatic,
	List:   func(r *examplev1.EnvoyResources) *[]runtime.RawExtension { return &r.Routes },
	newMsg: func() types.Resource { return &routev3.RouteConfiguration{} },
	name:   func(r types.Resource) string { return r.(*routev3.RouteConfiguration).GetName() },
	check:  checkRouteConfigLoad, refs: routeReferences,
}, {
	Field: "clusters", TypeURL: resourcev3.ClusterType, Noun: "cluster", Short: "CDS", Rank: 0, Wildcard: true, Destinations: true,
	FleetCeiling: 5000, Static: "static_resources.clusters",
	List:   func(r *examplev1.EnvoyResources) *[]runtime.RawExtension { return &r.Clusters },
	newMsg: func() types.Resource { return &clusterv3.Cluster{} },
	name:   func(r types.Resource) string { return r.(*clusterv3.Cluster).GetName() },
	check:  checkClusterLoad, refs: clusterReferencesOf,
}, {
	Field: "endpoints", TypeURL: resourcev3.EndpointType, Noun: "cluster load assignment", Short: "EDS", Rank: 1, Destinations: true,
	FleetCeiling: 5000, Static: "static_resources.clusters", AsStatic: endpointsAsStatic,
	List:   func(r *examplev1.EnvoyResources) *[]runtime.RawExtension { return &r.Endpoints },
	newMsg: func() types.Resource { return &endpointv3.ClusterLoadAssignment{} },
	name:   func(r types.Resource) string { return r.(*endpointv3.ClusterLoadAssignment).GetClusterName() },
	check:  checkEndpointsLoad, refs: noReferences,
}, {
	// Secrets come last: a proxy asks for a secret once a cluster or
	// listener names it.
	Field: "secrets", TypeURL: resourcev3.SecretType, Noun: "secret", Short: "SDS", Rank: 4, ByName: true,
	FleetCeiling: 2000, Static: "static_resources.secrets",
	List:   func(r *examplev1.EnvoyResources) *[]runtime.RawExtension { return &r.Secrets },
	newMsg: func() types.Resource { return &tlsv3.Secret{} },
	name:   func(r types.Resource) string { return r.(*tlsv3.Secret).GetName() },
	check:  checkSecretLoad, refs: noReferences,
}}

// PushOrder holds the indexes in Kinds of the kinds by Rank: the order in
// which a stream is sent the types, as the protocol's make-before-break
// asks: a cluster before its endpoints, both before the listeners that use
// them, a listener before its routes.
var PushOrder = pushOrder(Kinds[:])

// pushOrder returns the indexes in kinds of the kinds, by rank.
func pushOrder(kinds []Kind) []int {
	order := make([]int, len(kinds))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return kinds[order[a]].Rank < kinds[order[b]].Rank })
	return order
}

// KindOf returns the kind of typeURL, or the zero Kind.
func KindOf(typeURL string) Kind {
	for _, k := range Kinds {
		if k.TypeURL == typeURL {
			return k
		}
	}
	return Kind{}
}

// KindNamed returns the kind whose field is name (listeners, routes,
// clusters, endpoints or secrets).
func KindNamed(name string) (Kind, error) {
	var names []string
	for _, k := range Kinds {
		if k.Field == name {
			return k, nil
		}
		names = append(names, k.Field)
	}
	return Kind{}, fmt.Errorf("unknown type %q: want one of %s", name, strings.Join(names, ", "))
}

// validator is what every generated Envoy message has: protoc-gen-validate's checks.
type validator interface{ ValidateAll() error }

// Decode reads one raw resource of kind k, in YAML or JSON with Envoy's field
// names, strictly (a field the v3 API does not have is an error), and checks
// it with Envoy's own validation rules and the rules Envoy applies when it
// loads a resource (envoyrules.go). It returns the resource and its name.
//
// The same bytes decode to the same result, which is remembered (see
// decodeCache): a fleet's EnvoyConfigs are decoded by every reconcile of the
// fleet and every admission of one of them, and an edit changes few of
// their resources. The returned message is shared; callers never change it.
func Decode(k Kind, raw []byte) (types.Resource, string, error) {
	return decoded.get(k, raw, decode)
}

func decode(k Kind, raw []byte) (types.Resource, string, error) {
	js := raw
	// What the API server stores is JSON already; converting it as YAML
	// took most of the time of decoding a resource.
	if !json.Valid(raw) {
		var err error
		if js, err = yaml.YAMLToJSON(raw); err != nil {
			return nil, "", err
		}
	}
	msg := k.newMsg()
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, msg); err != nil {
		// protojson puts a space or, at random, a no-break space after
		// "proto:", so that nobody matches its messages; ours are stable.
		return nil, "", explainDecodeError(errors.New(strings.ReplaceAll(err.Error(), "\u00a0", " ")), js)
	}
	if err := msg.(validator).ValidateAll(); err != nil {
		return nil, k.name(msg), err
	}
	if err := validateNested(msg.ProtoReflect(), strings.TrimSuffix(k.Field, "s")); err != nil {
		return nil, k.name(msg), err
	}
	name := k.name(msg)
	if name == "" {
		return nil, "", fmt.Errorf("a name is required")
	}
	if err := checkLoad(k, msg); err != nil {
		return nil, name, err
	}
	return msg, name, nil
}

// Resource is one decoded resource and where it came from.
type Resource struct {
	Kind    Kind
	Name    string
	Message types.Resource
	Path    string // e.g. spec.resources.listeners[0], for messages
	Source  string // namespace/name of the EnvoyConfig

}

// Parse decodes every resource of an EnvoyConfig's spec. It returns the
// resources that are valid, and one error for each that is not, naming the
// resource and the field.
func Parse(source string, res examplev1.EnvoyResources) ([]Resource, []error) {
	var (
		out  []Resource
		errs []error
		seen = map[string]string{}
		// addresses holds the listeners' addresses: Envoy refuses two
		// listeners on one address.
		addresses []listenerAddress
	)
	for _, k := range Kinds {
		for i, raw := range *k.List(&res) {
			path := fmt.Sprintf("spec.resources.%s[%d]", k.Field, i)
			msg, name, err := Decode(k, raw.Raw)
			if err != nil {
				if name != "" {
					path += fmt.Sprintf(" (%q)", name)
				}
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
				continue
			}
			key := k.TypeURL + "/" + name
			if first, dup := seen[key]; dup {
				errs = append(errs, fmt.Errorf("%s: %s %q is already defined at %s", path, k.Noun, name, first))
				continue
			}
			if l, ok := msg.(*listenerv3.Listener); ok {
				if err := sharedAddress(l, path, &addresses); err != nil {
					errs = append(errs, fmt.Errorf("%s (%q): %w", path, name, err))
					continue
				}
			}
			seen[key] = path
			out = append(out, Resource{Kind: k, Name: name, Message: msg, Path: path, Source: source})
		}
	}
	return out, errs
}

// Version is a hash of resources' content: unchanged content, unchanged
// version, and so no push.
func Version(resources map[string][]types.Resource) string {
	typeURLs := make([]string, 0, len(resources))
	for t := range resources {
		typeURLs = append(typeURLs, t)
	}
	sort.Strings(typeURLs)
	h := NewHash()
	for _, t := range typeURLs {
		MarshalKind(h, t, resources[t], func(string, types.Resource, []byte, error) {})
	}
	return h.Sum()
}

// listenerAddress is an address of a listener seen before.
type listenerAddress struct {
	ListenerAddress
	listener string // its name and path, for messages
}

// sharedAddress returns an error naming the first address of l that
// conflicts with one of another listener of seen (see
// ListenerAddress.Conflict), and adds l's addresses to seen.
func sharedAddress(l *listenerv3.Listener, path string, seen *[]listenerAddress) error {
	addrs := ListenerAddresses(l)
	for _, a := range addrs {
		for _, other := range *seen {
			switch why := a.Conflict(other.ListenerAddress); {
			case why == "":
			case a.Key == other.Key:
				return fmt.Errorf("%s: %s is also the address of listener %s: %s", a.Path, a.Addr, other.listener, why)
			default:
				return fmt.Errorf("%s: %s and %s, the address of listener %s: %s", a.Path, a.Addr, other.Addr, other.listener, why)
			}
		}
	}
	for _, a := range addrs {
		*seen = append(*seen, listenerAddress{a, fmt.Sprintf("%q (%s)", l.GetName(), path)})
	}
	return nil
}

// MaxNACKDetail bounds a NACK's error_detail wherever the operator keeps it:
// the tracker, logs, events, reports and status all get it cut to this.
const MaxNACKDetail = 1024
