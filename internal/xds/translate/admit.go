package translate

import (
	"fmt"
	"strings"
)

// Admit checks a change to one EnvoyConfig of a fleet, as admission sees
// it, against the fleet as it would be after the change. before holds the
// fleet's EnvoyConfigs before the change; after is the changed EnvoyConfig,
// or nil when name is being deleted. It returns what is wrong with after's
// own resources (secret material inline among them, see inlineKeys, and
// what the content policy pol refuses), every reference in the fleet that
// the change would leave leading nowhere, naming the EnvoyConfig and the
// resource, and every listener of after whose address a listener of another
// EnvoyConfig of the fleet has. EnvoyConfigs of before whose content pol
// refuses are not served, so references to their resources lead nowhere. A
// reference that already led nowhere, or an address already shared, before
// the change is not the change's fault and is not returned.
// Whether the Secrets that spec.tlsSecrets name exist is not checked: a
// Secret may come after the EnvoyConfig that names it (cert-manager issues
// it), and its content is live anyway.
func Admit(pol Policy, before []Config, name string, after *Config) []string {
	if after != nil {
		p, errs := parse(*after)
		if len(errs) > 0 {
			return messages(errs)
		}
		if out := append(inlineKeys(p.resources), pol.refusals(after.Name, p.resources)...); len(out) > 0 {
			return out
		}
	}
	var was, will []Config
	for _, c := range before {
		if p, errs := parse(c); len(errs) > 0 || len(pol.refusals(c.Name, p.resources)) > 0 {
			continue // content the controller does not serve as it is
		}
		was = append(was, c)
		if c.Name != name {
			will = append(will, c)
		}
	}
	if after != nil {
		will = append(will, *after)
	}
	// A listener address the change makes two EnvoyConfigs share.
	var out []string
	if after != nil {
		out = append(out, pol.Bounds.fleetCounts(was, will)...)
	}
	shared := map[string]bool{}
	for _, s := range sharedAddresses(was) {
		shared[s.message(s.a, s.b)] = true
	}
	for _, s := range sharedAddresses(will) {
		switch {
		case shared[s.message(s.a, s.b)]:
		case s.a.config == name:
			out = append(out, s.message(s.a, s.b))
		case s.b.config == name:
			out = append(out, s.message(s.b, s.a))
		}
	}
	already := map[string]bool{}
	for config, errs := range checkReferences(mergeOf(was, nil, nil)) {
		for _, e := range errs {
			already[config+"\x00"+e.Error()] = true
		}
	}
	broken := checkReferences(mergeOf(will, nil, nil))
	for _, config := range sortedKeys(broken) {
		for _, e := range broken[config] {
			if already[config+"\x00"+e.Error()] {
				continue
			}
			if config == name {
				out = append(out, e.Error())
			} else {
				out = append(out, fmt.Sprintf("it would break EnvoyConfig %s: %v", config, e))
			}
		}
	}
	return out
}

// Refusal is admission's message for the problems Admit returned about a
// change to the EnvoyConfig named name (its name, without the namespace):
// the words the webhook refuses it with, and kubectl envoy diff repeats.
func Refusal(name string, deleting bool, problems []string) string {
	what := "is invalid"
	if deleting {
		what = "cannot be deleted"
	}
	return fmt.Sprintf("EnvoyConfig %s %s: %s", name, what, strings.Join(problems, "; "))
}
