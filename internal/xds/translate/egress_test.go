package translate

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
)

// allowlisted is testPolicy for a fleet whose Envoy narrows its
// destinations.
var allowlisted = func() Policy {
	p := testPolicy
	p.Allowed = &examplev1.EnvoyEgressAllowlist{
		CIDRs:   []string{"10.0.0.0/8", "100.64.0.0/10", "2001:db8::/32"},
		Domains: []string{"api.example.com", "*.example.org"},
	}
	return p
}()

// The allowlist narrows every destination the policy judges: a cluster's
// endpoints, by address and by name, and the other destination fields
// (a tracer's collector). What the policy refuses it refuses whatever the
// allowlist says.
func TestAllowlist(t *testing.T) {
	endpoint := `load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address`
	tests := []struct {
		name, field, raw string
		want             [][2]string
	}{
		{"an address in a CIDR", "clusters", staticCluster("k", "10.1.2.3", 80, ""), nil},
		{"an IPv6 address in a CIDR", "clusters", staticCluster("k", "2001:db8::1", 80, ""), nil},
		{"an address outside every CIDR", "clusters", staticCluster("k", "192.168.1.1", 80, ""),
			[][2]string{{endpoint, `"192.168.1.1" is outside the fleet's allowlist: its Envoy's spec.egress.allowed.cidrs (10.0.0.0/8, 100.64.0.0/10, 2001:db8::/32)`}}},
		{"an address outside, in another notation", "clusters", staticCluster("k", "0xc0a80101", 80, ""),
			[][2]string{{endpoint, "spec.egress.allowed.cidrs"}}},
		{"a metadata service inside a CIDR", "clusters", staticCluster("k", "100.100.100.200", 80, ""),
			[][2]string{{endpoint, "Alibaba Cloud"}}},
		{"an exact domain", "clusters", staticCluster("k", "API.example.com.", 443, ""), nil},
		{"a name below a wildcard domain", "clusters", staticCluster("k", "a.b.example.org", 443, ""), nil},
		{"the wildcard's own domain", "clusters", staticCluster("k", "example.org", 443, ""),
			[][2]string{{endpoint, `"example.org" is outside the fleet's allowlist: its Envoy's spec.egress.allowed.domains (api.example.com, *.example.org)`}}},
		{"a name that only ends like a domain", "clusters", staticCluster("k", "evilexample.org", 443, ""),
			[][2]string{{endpoint, "spec.egress.allowed.domains"}}},
		{"a Service's name", "clusters", staticCluster("k", "web.team.svc.cluster.local", 80, ""),
			[][2]string{{endpoint, "spec.egress.allowed.domains"}}},
		{"a tracer's collector outside", "listeners",
			hcmListener(`{"name": "r", "virtual_hosts": []}`, `, "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", `+
				`"collector_cluster": "k", "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON", "collector_hostname": "collector.example.net"}}}`),
			[][2]string{{"filter_chains[0].filters[0].typed_config(HttpConnectionManager).tracing.provider.typed_config(ZipkinConfig).collector_hostname", "spec.egress.allowed.domains"}}},
		{"a listener's own address", "listeners", hcmListener(`{"name": "r", "virtual_hosts": []}`, ""), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config("c", resourcesOf(tt.field, tt.raw))
			got := Admit(allowlisted, nil, cfg.Name, &cfg)
			if len(got) != len(tt.want) {
				t.Fatalf("refusals:\n  %s\nwant %d", strings.Join(got, "\n  "), len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], "spec.resources."+tt.field+"[0] (") || !strings.Contains(got[i], w[0]+" ") || !strings.Contains(got[i], w[1]) {
					t.Errorf("refusal %d = %s\nwant it to name %s and say %q", i, got[i], w[0], w[1])
				}
			}
			// Without the allowlist, the same content is judged as before.
			if tt.want != nil && !strings.Contains(tt.want[0][1], "Alibaba") {
				for _, r := range Admit(testPolicy, nil, cfg.Name, &cfg) {
					if strings.Contains(r, "allowlist") {
						t.Errorf("without an allowlist: %s", r)
					}
				}
			}
		})
	}
}

func resourcesOf(field, raw string) examplev1.EnvoyResources {
	r := []runtime.RawExtension{{Raw: []byte(raw)}}
	switch field {
	case "clusters":
		return examplev1.EnvoyResources{Clusters: r}
	case "listeners":
		return examplev1.EnvoyResources{Listeners: r}
	}
	panic(field)
}

// ForFleet takes the allowlist of the fleet's Envoy, and none without one;
// the verdicts of one policy are never taken for another's.
func TestForFleet(t *testing.T) {
	e := &examplev1.Envoy{Spec: examplev1.EnvoySpec{Egress: &examplev1.EnvoyEgress{Allowed: allowlisted.Allowed}}}
	if got := testPolicy.ForFleet(e).Allowed; got != allowlisted.Allowed {
		t.Errorf("ForFleet(Envoy with an allowlist).Allowed = %v", got)
	}
	if got := allowlisted.ForFleet(nil).Allowed; got != nil {
		t.Errorf("ForFleet(no Envoy).Allowed = %v, want none", got)
	}
	if got := allowlisted.ForFleet(&examplev1.Envoy{}).Allowed; got != nil {
		t.Errorf("ForFleet(Envoy without spec.egress).Allowed = %v, want none", got)
	}
	if testPolicy.identity() == allowlisted.identity() {
		t.Error("a policy with an allowlist has the identity of one without: the verdict cache would mix them")
	}
	// Judged once without the allowlist (and cached), then with it.
	cfg := config("c", resourcesOf("clusters", staticCluster("k", "192.168.1.1", 80, "")))
	if got := Admit(testPolicy, nil, cfg.Name, &cfg); len(got) != 0 {
		t.Fatalf("without an allowlist: %q", got)
	}
	if got := Admit(allowlisted, nil, cfg.Name, &cfg); len(got) != 1 {
		t.Errorf("with an allowlist, after a verdict without: %q", got)
	}
}

// MetadataPrefixes are the link-local ranges and every metadata service of
// the table that has an address, each a single address.
func TestMetadataPrefixes(t *testing.T) {
	got := MetadataPrefixes()
	for _, want := range []string{"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "fd00:ec2::23/128", "fd20:ce::254/128",
		"168.63.129.16/32", "100.100.100.200/32", "192.0.0.192/32", "100.80.80.80/32", "100.96.0.96/32"} {
		if !contains(got, netip.MustParsePrefix(want)) {
			t.Errorf("MetadataPrefixes() lacks %s: %v", want, got)
		}
	}
	names := 0
	for _, m := range metadataServices {
		if _, err := netip.ParseAddr(m.host); err != nil {
			names++
		}
	}
	if len(got) != len(linkLocal)+len(metadataServices)-names {
		t.Errorf("MetadataPrefixes() = %v: one per address of the table and the link-local ranges", got)
	}
}

func contains(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// A Service's endpoints are judged as an EnvoyConfig's: a hand-written
// EndpointSlice's address that the policy refuses is left out of the load
// assignment, and the EnvoyConfig's status says which and why.
func TestEndpointSlicesArePoliced(t *testing.T) {
	slice := func(addressType discoveryv1.AddressType, addrs ...string) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{AddressType: addressType, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
		}
		return s
	}
	tests := []struct {
		name     string
		pol      Policy
		slices   []discoveryv1.EndpointSlice
		want     []string // the load assignment's addresses
		warnings []string // parts of the status's warnings, one each
	}{
		{"pods' addresses", testPolicy, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "10.0.0.1", "10.0.0.2")},
			[]string{"10.0.0.1", "10.0.0.2"}, nil},
		{"Alibaba's metadata service beside a pod", testPolicy, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "10.0.0.1", "100.100.100.200")},
			[]string{"10.0.0.1"}, []string{`spec.serviceEndpoints[0]: Service "web"'s endpoint 100.100.100.200:8080: "100.100.100.200" is a cloud metadata service: Alibaba Cloud's`}},
		{"Azure's WireServer", testPolicy, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "168.63.129.16")},
			nil, []string{"Azure's WireServer"}},
		{"AWS's metadata service over IPv6", testPolicy, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv6, "fd00:ec2::254")},
			nil, []string{"[fd00:ec2::254]:8080", "AWS's instance metadata service"}},
		{"the metadata service, link-local", testPolicy, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "169.254.169.254")},
			nil, []string{"link-local"}},
		{"the metadata service by name", testPolicy, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeFQDN, "metadata.google.internal")},
			nil, []string{"Google Cloud's metadata server"}},
		{"the operator's xDS Service's address", testPolicy, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "10.96.0.10")},
			nil, []string{"the operator's"}},
		{"a pod outside the allowlist", allowlisted, []discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, "10.0.0.1", "192.168.0.1")},
			[]string{"10.0.0.1"}, []string{"192.168.0.1:8080", "spec.egress.allowed.cidrs"}},
	}
	se := examplev1.ServiceEndpoints{Cluster: "k", Service: "web", Port: intstr.FromString("http")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, loc := range LoadAssignment(tt.pol, "team", se, tt.slices).GetEndpoints() {
				for _, ep := range loc.GetLbEndpoints() {
					got = append(got, ep.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("load assignment's addresses = %q, want %q", got, tt.want)
			}
			// Translate serves the same, and says why in the status.
			c := Config{Name: "team/c", Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "edge", ServiceEndpoints: []examplev1.ServiceEndpoints{se},
				Resources: examplev1.EnvoyResources{Clusters: []runtime.RawExtension{{Raw: []byte(`{"name": "k", "type": "EDS", "connect_timeout": "1s", "eds_cluster_config": {"eds_config": {"ads": {}}}}`)}}}}}
			ir := Translate(Input{Configs: []Config{c}, Policy: tt.pol, Slices: map[string][]discoveryv1.EndpointSlice{"web": tt.slices}})
			var served []string
			for _, r := range ir.Resources[resourcev3.EndpointType] {
				for _, loc := range r.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
					for _, ep := range loc.GetLbEndpoints() {
						served = append(served, ep.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
					}
				}
			}
			if !reflect.DeepEqual(served, tt.want) {
				t.Errorf("served addresses = %q, want %q", served, tt.want)
			}
			st := ir.Configs["team/c"]
			if st.Choice != ChoiceCurrent {
				t.Errorf("served %s: a Service's endpoints leave out what is refused, not the EnvoyConfig", st.Choice)
			}
			if len(tt.warnings) == 0 && len(st.Endpoints) != 0 || len(tt.warnings) > 0 && len(st.Endpoints) != 1 {
				t.Fatalf("status's endpoint warnings = %q", st.Endpoints)
			}
			for _, w := range tt.warnings {
				if !strings.Contains(st.Endpoints[0], w) || !strings.Contains(st.Endpoints[0], `left out of cluster "k"`) {
					t.Errorf("warning = %s\nwant it to say %q", st.Endpoints[0], w)
				}
			}
		})
	}
}
