package translate

import (
	"fmt"
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
	field  string // the address's field in the listener
	addr   string
}

// sharedAddress is an address two EnvoyConfigs both serve.
type sharedAddress struct{ a, b addressUse }

// sharedAddresses returns the addresses that listeners of two different
// configs share, among the listeners the fleet would be served (of two
// listeners of one name, the older config's), each pair once, in a stable
// order.
func sharedAddresses(configs []Config) []sharedAddress {
	byKey := map[string][]addressUse{}
	var keys []string
	for _, r := range sortedResources(mergeOf(configs, nil, nil)) {
		l, ok := r.Message.(*listenerv3.Listener)
		if !ok {
			continue
		}
		for _, a := range resource.ListenerAddresses(l) {
			if _, ok := byKey[a.Key]; !ok {
				keys = append(keys, a.Key)
			}
			byKey[a.Key] = append(byKey[a.Key], addressUse{
				config: r.Source, path: fmt.Sprintf("%s (%q)", r.Path, r.Name), field: a.Path, addr: a.Addr,
			})
		}
	}
	sort.Strings(keys)
	var out []sharedAddress
	for _, k := range keys {
		uses := byKey[k]
		for i := range uses {
			for j := i + 1; j < len(uses); j++ {
				if uses[i].config != uses[j].config {
					out = append(out, sharedAddress{uses[i], uses[j]})
				}
			}
		}
	}
	return out
}

// message says, for the EnvoyConfig of use, that other has its address.
func (s sharedAddress) message(use, other addressUse) string {
	return fmt.Sprintf("%s: %s: %s is also the address of listener %s of EnvoyConfig %s: Envoy refuses two listeners on one address",
		use.path, use.field, use.addr, other.path, other.config)
}

// resolveSharedAddresses makes the content the fleet is served, choice,
// free of listener addresses that two EnvoyConfigs share. Of two that share
// one, the one whose content changed since it was published is not served
// (its published content is, if it has any); of two that both changed, the
// younger. Two whose content is the published one are left as they are: a
// proxy loses no configuration because another EnvoyConfig changed. It
// returns, by EnvoyConfig, why its content is not served.
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
			switch {
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
		why[blamed] = append(why[blamed], msg)
		if p, ok := published[blamed]; ok {
			choice[blamed] = p
		} else {
			delete(choice, blamed)
		}
	}
}
