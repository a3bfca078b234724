package translate

import (
	"fmt"
	"slices"
	"sort"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Envoy refuses a listener whose address another listener of the proxy
// already has ("error adding listener: 'b' has duplicate address ... as
// existing listener"), and with it the whole LDS update: every proxy of the
// fleet would NACK. Within one EnvoyConfig, resource.Parse refuses it; across
// the EnvoyConfigs of a fleet, the fleet is judged here.

// addressUse is a listener address an EnvoyConfig serves.
type addressUse struct {
	config string // namespace/name of the EnvoyConfig
	path   string // its listener, as messages name it
	resource.ListenerAddress
}

// sharedAddress is a pair of addresses of two EnvoyConfigs that Envoy
// cannot both listen on (resource.ListenerAddress.Conflict): one address,
// or two that overlap where either listener gives up SO_REUSEPORT.
type sharedAddress struct{ a, b addressUse }

// sharedAddresses returns the pairs of addresses of listeners of two
// different configs that conflict, among the listeners the fleet would be
// served (of two listeners of one name, the older config's), each pair
// once, in a stable order.
func sharedAddresses(configs []Config) []sharedAddress {
	var uses []addressUse
	for _, r := range sortedResources(mergeOf(configs, nil, nil)) {
		l, ok := r.Message.(*listenerv3.Listener)
		if !ok {
			continue
		}
		for _, a := range resource.ListenerAddresses(l) {
			uses = append(uses, addressUse{config: r.Source, path: fmt.Sprintf("%s (%q)", r.Path, r.Name), ListenerAddress: a})
		}
	}
	// The pairs of one address first, by address, then those that overlap.
	sort.SliceStable(uses, func(i, j int) bool { return uses[i].Key < uses[j].Key })
	var same, overlapping []sharedAddress
	for i := range uses {
		for j := i + 1; j < len(uses); j++ {
			a, b := uses[i], uses[j]
			switch {
			case a.config == b.config || a.Conflict(b.ListenerAddress) == "":
			case a.Key == b.Key:
				same = append(same, sharedAddress{a, b})
			default:
				overlapping = append(overlapping, sharedAddress{a, b})
			}
		}
	}
	return append(same, overlapping...)
}

// message says, for the EnvoyConfig of use, that other has its address.
func (s sharedAddress) message(use, other addressUse) string {
	why := use.Conflict(other.ListenerAddress)
	if IsGatewayConfig(other.config) && !IsGatewayConfig(use.config) {
		why += "; a Gateway's listener wins over an EnvoyConfig's"
	}
	if use.Key == other.Key {
		return fmt.Sprintf("%s: %s: %s is also the address of listener %s of %s: %s",
			use.path, use.Path, use.Addr, other.path, SourceOf(other.config), why)
	}
	return fmt.Sprintf("%s: %s: %s and %s, the address of listener %s of %s: %s",
		use.path, use.Path, use.Addr, other.Addr, other.path, SourceOf(other.config), why)
}

// resolveSharedAddresses makes the content the fleet is served, choice,
// free of listener addresses that two EnvoyConfigs share. Of two that share
// one, a Gateway's Config and an EnvoyConfig, the EnvoyConfig is not
// served: its published content is, unless it has the address too, and
// then none of it. Of two EnvoyConfigs, the one whose content changed since
// it was published is not served (its published content is, if it has
// any); of two that both changed, the younger. Two whose content is the
// published one are left as they are: a proxy loses no configuration
// because another EnvoyConfig changed. It returns, by EnvoyConfig, why its
// content is not served.
func resolveSharedAddresses(choice map[string]Config, published map[string]Config, current []Config) map[string][]string {
	created := map[string]Config{}
	for _, c := range current {
		created[c.Name] = c
	}
	changed := func(name string) bool {
		p, ok := published[name]
		return !ok || !sameContent(p, choice[name])
	}
	younger := func(a, b string) bool {
		ca, cb := created[a].Created, created[b].Created
		if !ca.Equal(cb) {
			return ca.After(cb)
		}
		return a > b
	}
	why := map[string][]string{}
	for {
		var blamed, msg string
	pairs:
		for _, s := range sharedAddresses(configsOf(choice)) {
			a, b := s.a, s.b
			switch ga, gb := IsGatewayConfig(a.config), IsGatewayConfig(b.config); {
			case ga && !gb:
				blamed, msg = b.config, s.message(b, a)
			case gb && !ga:
				blamed, msg = a.config, s.message(a, b)
			case changed(a.config) && changed(b.config):
				if younger(a.config, b.config) {
					blamed, msg = a.config, s.message(a, b)
				} else {
					blamed, msg = b.config, s.message(b, a)
				}
			case changed(a.config):
				blamed, msg = a.config, s.message(a, b)
			case changed(b.config):
				blamed, msg = b.config, s.message(b, a)
			default:
				continue
			}
			break pairs
		}
		if blamed == "" {
			return why
		}
		if !slices.Contains(why[blamed], msg) {
			why[blamed] = append(why[blamed], msg)
		}
		if p, ok := published[blamed]; ok && !sameContent(p, choice[blamed]) {
			choice[blamed] = p
		} else {
			delete(choice, blamed)
		}
	}
}
