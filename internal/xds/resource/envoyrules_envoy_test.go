package resource_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// envoys bounds how many Envoys the tests here run at once.
var envoys = make(chan struct{}, 2)

// load has a real Envoy load yaml, one resource of kind, in the fleet's
// bootstrap (realenvoy.Resources), and returns its refusal or nil.
func load(t *testing.T, envoy, kind, yaml string) error {
	t.Helper()
	var r realenvoy.Resources
	if err := r.Add(kind, []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	envoys <- struct{}{}
	defer func() { <-envoys }()
	err := realenvoy.Load(envoy, t.TempDir(), r)
	if err != nil && !errors.Is(err, realenvoy.ErrRefused) {
		t.Fatal(err)
	}
	return err
}

// Every case of the table that Envoy refuses, a real Envoy refuses, saying
// what the table records.
func TestEnvoyRefusesWhatTheRulesRefuse(t *testing.T) {
	envoy := realenvoy.Require(t)
	for _, tc := range resource.EnvoyRuleCases() {
		t.Run(tc.Name, func(t *testing.T) {
			if strings.HasPrefix(tc.Envoy, "(no error") {
				t.Skipf("Envoy refuses nothing here: %s", tc.Envoy)
			}
			t.Parallel()
			err := load(t, envoy, tc.Kind, tc.YAML)
			if err == nil {
				t.Fatalf("Envoy loads it; the table says it refuses it with %q", tc.Envoy)
			}
			if said := realenvoy.Said(err); !strings.Contains(said, tc.Envoy) {
				t.Errorf("Envoy says %q, the table %q", said, tc.Envoy)
			}
		})
	}
}

// What only proxyless gRPC clients take, a real Envoy refuses.
func TestEnvoyRefusesWhatOnlyProxylessClientsTake(t *testing.T) {
	envoy := realenvoy.Require(t)
	for _, tc := range resource.ProxylessCases() {
		t.Run(tc.Name, func(t *testing.T) {
			err := load(t, envoy, tc.Kind, tc.YAML)
			if said := realenvoy.Said(err); err == nil || !strings.Contains(said, tc.Envoy) {
				t.Errorf("Envoy says %q, the table %q", said, tc.Envoy)
			}
		})
	}
}

// Every valid edge case of the table, a real Envoy loads.
func TestEnvoyLoadsWhatTheRulesAdmit(t *testing.T) {
	envoy := realenvoy.Require(t)
	for _, tc := range resource.EnvoyValidCases() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			if err := load(t, envoy, tc.Kind, tc.YAML); err != nil {
				t.Errorf("Envoy refuses it: %s", realenvoy.Said(err))
			}
		})
	}
}

// Envoy listens on the listeners of the table it can listen on, and drops,
// or exits on, the others, saying what the table records.
func TestEnvoyListensWhereTheRulesAdmit(t *testing.T) {
	envoy := realenvoy.Require(t)
	for _, tc := range resource.EnvoyListenCases() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			envoys <- struct{}{}
			defer func() { <-envoys }()
			port, err := realenvoy.UnusedPort()
			if err != nil {
				t.Fatal(err)
			}
			admin := 0
			if tc.Admin {
				admin = port
			}
			var ls []string
			for _, l := range tc.ListenersOn(strconv.Itoa(port)) {
				ls = append(ls, string(l.Raw))
			}
			boot := fmt.Sprintf("admin: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}\nstatic_resources: {listeners: [%s]}\n", admin, strings.Join(ls, ", "))
			names, logged, err := realenvoy.ListeningOn(envoy, t.TempDir(), []byte(boot))
			if err != nil && !errors.Is(err, realenvoy.ErrRefused) {
				t.Fatal(err)
			}
			said := strings.ReplaceAll(tc.Envoy, "PORT", strconv.Itoa(port))
			switch {
			case tc.Field == "" && (err != nil || len(names) != len(ls)):
				t.Errorf("Envoy listens on %q of %d listeners (%v): %s", names, len(ls), err, logged)
			case tc.Field != "" && err == nil && len(names) == len(ls):
				t.Errorf("Envoy listens on all of %q; the table says it cannot (%s)", names, said)
			case tc.Field != "" && !strings.Contains(logged, said):
				t.Errorf("Envoy says %q, the table %q", logged, said)
			}
		})
	}
}

var programSize = regexp.MustCompile(`RE2 program size of (\d+) > max program size of 1\.`)

// The program sizes of the regular expressions of re2ProgramSizes are
// those Envoy's RE2 gives (it says them when a regular expression is over
// its max_program_size), and programLowerBound is never above them.
func TestProgramSizesAreEnvoys(t *testing.T) {
	envoy := realenvoy.Require(t)
	for _, tc := range resource.RE2ProgramSizes() {
		t.Run(tc.Regex, func(t *testing.T) {
			t.Parallel()
			quoted, _ := json.Marshal(tc.Regex)
			err := load(t, envoy, "routes", `{name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {safe_regex: {regex: `+string(quoted)+`, google_re2: {max_program_size: 1}}}, route: {cluster: c}}]}]}`)
			if err == nil {
				t.Skip("Envoy loads it over max_program_size 1, and so gives no program size")
			}
			m := programSize.FindStringSubmatch(realenvoy.Said(err))
			if m == nil {
				t.Fatalf("Envoy gives no program size: %v", err)
			}
			size, _ := strconv.Atoi(m[1])
			if size != tc.RE2 {
				t.Errorf("Envoy's RE2 program size is %d, the table's %d", size, tc.RE2)
			}
			re, _ := syntax.Parse(tc.Regex, syntax.Perl)
			if bound := resource.ProgramLowerBound(re); bound > size {
				t.Errorf("bound %d is above Envoy's program size %d", bound, size)
			}
		})
	}
}
