package resource

import (
	"regexp/syntax"

	"k8s.io/apimachinery/pkg/runtime"
)

// The tables of the rules' cases, for the tests that have a real Envoy load
// them (envoyrules_envoy_test.go). Those are in package resource_test:
// Envoy loads through package envoyload, which imports this package.

// EnvoyCase is a case of envoyRuleCases, proxylessCases or envoyValidCases.
type EnvoyCase struct{ Name, Kind, YAML, Field, Envoy string }

// EnvoyRuleCases are envoyRuleCases.
func EnvoyRuleCases() []EnvoyCase {
	var out []EnvoyCase
	for _, c := range envoyRuleCases {
		out = append(out, EnvoyCase{c.name, c.kind, c.yaml, c.field, c.envoy})
	}
	return out
}

// ProxylessCases are proxylessCases.
func ProxylessCases() []EnvoyCase {
	var out []EnvoyCase
	for _, c := range proxylessCases {
		out = append(out, EnvoyCase{c.name, c.kind, c.yaml, c.field, c.envoy})
	}
	return out
}

// EnvoyValidCases are envoyValidCases.
func EnvoyValidCases() []EnvoyCase {
	var out []EnvoyCase
	for _, c := range envoyValidCases {
		out = append(out, EnvoyCase{Name: c.name, Kind: c.kind, YAML: c.yaml})
	}
	return out
}

// EnvoyListenCase is a case of envoyListenCases.
type EnvoyListenCase struct {
	Name         string
	Admin        bool
	Field, Envoy string
	ListenersOn  func(port string) []runtime.RawExtension
}

// EnvoyListenCases are envoyListenCases.
func EnvoyListenCases() []EnvoyListenCase {
	var out []EnvoyListenCase
	for _, c := range envoyListenCases {
		out = append(out, EnvoyListenCase{c.name, c.admin, c.field, c.envoy, c.listenersOn})
	}
	return out
}

// ProgramSize is a case of re2ProgramSizes.
type ProgramSize struct {
	Regex string
	RE2   int
}

// RE2ProgramSizes are re2ProgramSizes.
func RE2ProgramSizes() []ProgramSize {
	var out []ProgramSize
	for _, c := range re2ProgramSizes {
		out = append(out, ProgramSize{c.regex, c.re2})
	}
	return out
}

// ProgramLowerBound is programLowerBound.
func ProgramLowerBound(re *syntax.Regexp) int { return programLowerBound(re) }
