package translate

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

type resourceKey struct{ typeURL, name string }

// merge keeps, for every type and name, the resource of a Gateway's
// Config over an EnvoyConfig's, and otherwise the resource of the oldest
// config (by name when two are as old).
func merge(configs []parsed) (map[resourceKey]resource.Resource, map[string][]string) {
	sorted := append([]parsed(nil), configs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if gi, gj := IsGatewayConfig(sorted[i].name), IsGatewayConfig(sorted[j].name); gi != gj {
			return gi
		}
		if !sorted[i].created.Equal(sorted[j].created) {
			return sorted[i].created.Before(sorted[j].created)
		}
		return sorted[i].name < sorted[j].name
	})
	winners := map[resourceKey]resource.Resource{}
	clashes := map[string][]string{}
	for _, c := range sorted {
		for _, r := range c.resources {
			key := resourceKey{r.Kind.TypeURL, r.Name}
			if w, taken := winners[key]; taken {
				if w.Source != r.Source {
					what := fmt.Sprintf("%s %q", r.Kind.Noun, r.Name)
					lost, won := "which is older and wins", "this one is older and is served"
					if IsGatewayConfig(w.Source) && !IsGatewayConfig(r.Source) {
						lost, won = "whose resources win over every EnvoyConfig's", "the Gateway's is served"
					}
					clashes[r.Source] = append(clashes[r.Source],
						fmt.Sprintf("%s (%s) is also defined by %s, %s", what, r.Path, SourceOf(w.Source), lost))
					clashes[w.Source] = append(clashes[w.Source],
						fmt.Sprintf("%s (%s) is also defined by %s; %s", what, w.Path, SourceOf(r.Source), won))
				}
				continue
			}
			winners[key] = r
		}
	}
	return winners, clashes
}

// GatewayConfigMark marks the name of a Gateway's Config (xds/gateway): it
// is "<namespace>/gateway:<name>", which no EnvoyConfig can be named, since
// ':' is not allowed in an object's name. A Gateway's Config wins every
// conflict with an EnvoyConfig of its fleet: a resource of the same name,
// a listener on the same address. The name is recorded with the content,
// so every replica renders a revision by the same rule.
const GatewayConfigMark = "gateway:"

// gatewayPrefix is what the names of the resources of the Gateway whose
// Config is named name start with: "<namespace>/<gateway>/" (xds/gateway
// names them so).
func gatewayPrefix(name string) string {
	ns, rest, _ := strings.Cut(name, "/")
	return ns + "/" + strings.TrimPrefix(rest, GatewayConfigMark) + "/"
}

// IsGatewayConfig reports whether name, a Config's, is a Gateway's.
func IsGatewayConfig(name string) bool {
	_, rest, ok := strings.Cut(name, "/")
	return ok && strings.HasPrefix(rest, GatewayConfigMark)
}

// SourceOf names the object a Config comes from, as messages name it:
// "Gateway <namespace>/<name>" for a Gateway's, "EnvoyConfig
// <namespace>/<name>" for an EnvoyConfig.
func SourceOf(name string) string {
	if IsGatewayConfig(name) {
		return "Gateway " + strings.TrimSuffix(gatewayPrefix(name), "/")
	}
	return "EnvoyConfig " + name
}

func byType(merged map[resourceKey]resource.Resource) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	keys := make([]resourceKey, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].typeURL != keys[j].typeURL {
			return keys[i].typeURL < keys[j].typeURL
		}
		return keys[i].name < keys[j].name
	})
	for _, k := range keys {
		if m := merged[k].Message; m != nil { // a declared secret whose Secret serves none
			out[k.typeURL] = append(out[k.typeURL], m)
		}
	}
	return out
}

// checkReferences returns, by config name, the references that lead nowhere
// (resource.References): a listener's route configuration (RDS) that no
// config defines, a cluster named by a route or a TCP proxy that no config
// defines, and a secret that a listener or a cluster asks this server for
// over SDS and that no config defines, inline or in spec.tlsSecrets.
func checkReferences(merged map[resourceKey]resource.Resource) map[string][]error {
	has := func(typeURL, name string) bool { _, ok := merged[resourceKey{typeURL, name}]; return ok }
	// The Gateways of the fleet, by the prefix of their resources' names.
	gateways := map[string]string{}
	for _, r := range merged {
		if IsGatewayConfig(r.Source) {
			gateways[gatewayPrefix(r.Source)] = r.Source
		}
	}
	problems := map[string][]error{}
	report := func(r resource.Resource, kind, name string) {
		msg := fmt.Sprintf("%s (%q): %s %q does not exist", r.Path, r.Name, kind, name)
		for prefix, gw := range gateways {
			if strings.HasPrefix(name, prefix) && !IsGatewayConfig(r.Source) {
				msg += fmt.Sprintf(": %s does not serve it (a Gateway's resources go with its routes, and its changes win over the EnvoyConfigs that use them)", SourceOf(gw))
			}
		}
		problems[r.Source] = append(problems[r.Source], errors.New(msg))
	}
	for _, r := range sortedResources(merged) {
		for _, ref := range resource.References(r.Message) {
			// What warms until the resource it names comes may wait for it.
			if !ref.Warming && !has(ref.TypeURL, ref.Name) {
				report(r, resource.KindOf(ref.TypeURL).Noun, ref.Name)
			}
		}
	}
	return problems
}

func sortedResources(merged map[resourceKey]resource.Resource) []resource.Resource {
	out := make([]resource.Resource, 0, len(merged))
	for _, r := range merged {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Source < out[j].Path+out[j].Source })
	return out
}
