package translate

import (
	"cmp"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// UnknownZone is the locality zone of endpoints whose EndpointSlice gives none.
const UnknownZone = "unknown"

// LoadAssignment builds an EDS cluster's ClusterLoadAssignment from the
// EndpointSlices of the Service it names, in namespace ns: every ready
// endpoint address, at the port se.Port names, grouped by zone (UnknownZone
// when the slice gives none), but those that pol refuses as a destination
// (leftOut says which, and why). A Service's endpoints are whatever its
// EndpointSlices say, and anyone who may write an EndpointSlice in the
// namespace may write any address there: they are judged as the endpoints
// an EnvoyConfig writes are. The result is sorted, so that the same
// endpoints always make the same resource (and the same version).
func LoadAssignment(pol Policy, ns string, se examplev1.ServiceEndpoints, slices []discoveryv1.EndpointSlice) *endpointv3.ClusterLoadAssignment {
	cla, _ := loadAssignment(pol, ns, se, slices)
	return cla
}

// loadAssignment is LoadAssignment, and the endpoints it leaves out, each
// as address:port and why.
func loadAssignment(pol Policy, ns string, se examplev1.ServiceEndpoints, slices []discoveryv1.EndpointSlice) (*endpointv3.ClusterLoadAssignment, []string) {
	type hostPort struct {
		host string
		port int32
	}
	byZone := map[string]map[hostPort]bool{}
	var leftOut []string
	for _, s := range slices {
		port, ok := matchPort(s.Ports, se.Port)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			zone := ""
			if ep.Zone != nil {
				zone = *ep.Zone
			}
			if byZone[zone] == nil {
				byZone[zone] = map[hostPort]bool{}
			}
			for _, a := range ep.Addresses {
				if err := pol.endpointRefusal(ns, a, uint32(port)); err != nil {
					leftOut = append(leftOut, fmt.Sprintf("%s: %v", net.JoinHostPort(a, strconv.Itoa(int(port))), err))
					continue
				}
				byZone[zone][hostPort{a, port}] = true
			}
		}
	}
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: se.Cluster}
	zones := make([]string, 0, len(byZone))
	for z := range byZone {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		eps := make([]hostPort, 0, len(byZone[z]))
		for hp := range byZone[z] {
			eps = append(eps, hp)
		}
		sort.Slice(eps, func(i, j int) bool {
			if eps[i].host != eps[j].host {
				return eps[i].host < eps[j].host
			}
			return eps[i].port < eps[j].port
		})
		// Every group has a locality and a weight: proxyless gRPC clients reject
		// a locality without an ID and ignore one without a weight.
		loc := &endpointv3.LocalityLbEndpoints{
			Locality:            &corev3.Locality{Zone: cmp.Or(z, UnknownZone)},
			LoadBalancingWeight: wrapperspb.UInt32(1),
		}
		for _, hp := range eps {
			loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: hp.host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(hp.port)},
					}}},
				}},
			})
		}
		cla.Endpoints = append(cla.Endpoints, loc)
	}
	return cla, unique(leftOut)
}

// matchPort finds the slice port that want names: by name, or by number.
func matchPort(ports []discoveryv1.EndpointPort, want intstr.IntOrString) (int32, bool) {
	for _, p := range ports {
		if p.Port == nil {
			continue
		}
		if want.Type == intstr.String && p.Name != nil && *p.Name == want.StrVal {
			return *p.Port, true
		}
		if want.Type == intstr.Int && *p.Port == want.IntVal {
			return *p.Port, true
		}
	}
	return 0, false
}

var endpointKind = resource.KindOf(resourcev3.EndpointType)

// endpointWarnings explains serviceEndpoints that can yield no endpoints
// although their Service has some: a port that none of its EndpointSlices
// has; and the endpoints that the content policy pol leaves out (ns is the
// EnvoyConfig's namespace).
func endpointWarnings(pol Policy, ns string, ses []examplev1.ServiceEndpoints, slices map[string][]discoveryv1.EndpointSlice) []string {
	var out []string
	for i, se := range ses {
		ss := slices[se.Service]
		if len(ss) == 0 {
			continue // no endpoints yet: nothing to say about the port
		}
		if _, leftOut := loadAssignment(pol, ns, se, ss); len(leftOut) > 0 {
			for _, l := range leftOut {
				out = append(out, fmt.Sprintf("spec.serviceEndpoints[%d]: Service %q's endpoint %s; it is left out of cluster %q", i, se.Service, l, se.Cluster))
			}
		}
		found := false
		var have []string
		for _, s := range ss {
			if _, ok := matchPort(s.Ports, se.Port); ok {
				found = true
				break
			}
			for _, p := range s.Ports {
				if p.Port != nil {
					have = append(have, portName(p))
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("spec.serviceEndpoints[%d].port: Service %q has no endpoint port %s (its EndpointSlices have %s)",
				i, se.Service, se.Port.String(), strings.Join(unique(have), ", ")))
		}
	}
	return out
}

func portName(p discoveryv1.EndpointPort) string {
	if p.Name != nil && *p.Name != "" {
		return fmt.Sprintf("%s (%d)", *p.Name, *p.Port)
	}
	return fmt.Sprint(*p.Port)
}

func unique(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}
