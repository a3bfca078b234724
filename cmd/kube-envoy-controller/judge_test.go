package main

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
)

// The operator says once, at start, whether it loads EnvoyConfigs in a
// real Envoy: without one, a warning that says why.
func TestJudgeSaidAtStart(t *testing.T) {
	for _, tt := range []struct {
		name, envoy, want string
	}{
		{"none", "no-such-envoy", `"WARNING: EnvoyConfigs are admitted and served on the operator's rules alone, not loaded in a real Envoy first`},
		{"an Envoy", realenvoy.Stalling(t), `"EnvoyConfigs are loaded in a real Envoy before they are admitted or recorded" "envoy"=`},
	} {
		var lines []string
		log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
		newJudge(log, envoyjudge.Options{Envoy: tt.envoy, Concurrency: 1, Timeout: time.Second})
		if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
			t.Errorf("%s: logged %q; want one line with %s", tt.name, lines, tt.want)
		}
		if tt.name == "none" && !strings.Contains(lines[0], `"reason"="no Envoy to load EnvoyConfigs in (--envoy-path no-such-envoy)`) {
			t.Errorf("%s: logged %q; want the reason", tt.name, lines)
		}
	}
}
