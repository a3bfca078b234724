package resource

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
)

// How Envoy chooses among a listener's filter chains, and what it refuses.
//
// With a filter_chain_matcher, the matcher names the chain: every chain
// needs a name, and no two the same ("\"name\" field is duplicated with
// value 'a'"). Without one, Envoy files each chain under every combination
// of the values its filter_chain_match lists (a destination port, each
// destination prefix, server name, the transport protocol, each
// application protocol, each direct source prefix, the source type, each
// source prefix and each source port; an empty list is one value of its
// own, "any"), and refuses two chains filed under one combination:
// "filter chain '' has the same matching rules defined as ''" when their
// matches are equal, "multiple filter chains with overlapping matching
// rules are defined" otherwise. It compares server names in lower case,
// with "*.example.com" and ".example.com" alike, and prefixes by the
// network they denote (a prefix without prefix_len is /0).

func checkFilterChains(f *findings, l *listenerv3.Listener) {
	if l.GetFilterChainMatcher() != nil {
		names := map[string]int{}
		for i, fc := range l.GetFilterChains() {
			np := index("", "filter_chains", i) + ".name"
			if fc.GetName() == "" {
				f.add(np, "with a filter_chain_matcher, every filter chain needs a name")
				continue
			}
			if first, dup := names[fc.GetName()]; dup {
				f.add(np, "%q is also the name of filter_chains[%d]", fc.GetName(), first)
			}
			names[fc.GetName()] = i
		}
		return
	}
	filed := map[string]int{}
	for i, fc := range l.GetFilterChains() {
		mp := index("", "filter_chains", i) + ".filter_chain_match"
		same := -1
		for j := range i {
			if proto.Equal(fc.GetFilterChainMatch(), l.GetFilterChains()[j].GetFilterChainMatch()) {
				same = j
				break
			}
		}
		if same >= 0 {
			f.add(mp, "the same as that of filter_chains[%d]: Envoy could not tell the two apart", same)
			continue
		}
		for _, k := range matchKeys(fc.GetFilterChainMatch()) {
			first, dup := filed[k]
			switch {
			case dup && first == i:
				f.add(mp, "lists one value twice, which Envoy takes for two filter chains of one match (%s)", strings.ReplaceAll(k, "\x00", ", "))
			case dup:
				f.add(mp, "overlaps that of filter_chains[%d]: a connection could match both (%s)", first, strings.ReplaceAll(k, "\x00", ", "))
			default:
				filed[k] = i
				continue
			}
			break
		}
	}
}

// maxMatchKeys bounds the combinations of one filter chain's match that
// admission compares.
const maxMatchKeys = 1 << 14

// matchKeys returns the combinations Envoy files a chain of match m under,
// or nil when there are more than maxMatchKeys.
func matchKeys(m *listenerv3.FilterChainMatch) []string {
	port := ""
	if m.GetDestinationPort() != nil {
		port = strconv.FormatUint(uint64(m.GetDestinationPort().GetValue()), 10)
	}
	var servers []string
	for _, s := range m.GetServerNames() {
		s = strings.ToLower(s)
		if strings.HasPrefix(s, "*.") {
			s = s[1:]
		}
		servers = append(servers, s)
	}
	var ports []string
	for _, p := range m.GetSourcePorts() {
		ports = append(ports, strconv.FormatUint(uint64(p), 10))
	}
	dims := [][]string{
		{"destination_port=" + port},
		prefixes("prefix_ranges", m.GetPrefixRanges()),
		values("server_names", servers),
		{"transport_protocol=" + m.GetTransportProtocol()},
		values("application_protocols", m.GetApplicationProtocols()),
		prefixes("direct_source_prefix_ranges", m.GetDirectSourcePrefixRanges()),
		{"source_type=" + m.GetSourceType().String()},
		prefixes("source_prefix_ranges", m.GetSourcePrefixRanges()),
		values("source_ports", ports),
	}
	n := 1
	for _, d := range dims {
		n *= len(d)
		if n > maxMatchKeys {
			return nil // Envoy's to judge; admission does not spend that much
		}
	}
	keys := []string{""}
	for _, d := range dims {
		var next []string
		for _, k := range keys {
			for _, v := range d {
				next = append(next, k+v+"\x00")
			}
		}
		keys = next
	}
	for i := range keys {
		keys[i] = strings.TrimSuffix(keys[i], "\x00")
	}
	return keys
}

// values returns a list's values as field=value, or field=any when empty.
func values(field string, vs []string) []string {
	if len(vs) == 0 {
		return []string{field + "=any"}
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = field + "=" + v
	}
	return out
}

// prefixes returns the networks of CIDR ranges, as values.
func prefixes(field string, rs []*corev3.CidrRange) []string {
	var out []string
	for _, r := range rs {
		s := fmt.Sprintf("%s/%d", r.GetAddressPrefix(), r.GetPrefixLen().GetValue())
		if p, err := netip.ParsePrefix(s); err == nil {
			s = p.Masked().String()
		}
		out = append(out, s)
	}
	return values(field, out)
}
