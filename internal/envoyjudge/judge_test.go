package envoyjudge_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyjudge"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// cluster is resources with one cluster named name.
func cluster(t *testing.T, name string) envoyload.Resources {
	t.Helper()
	var r envoyload.Resources
	if err := r.Add("clusters", []byte(`{"name": "`+name+`", "type": "STATIC", "connect_timeout": "1s"}`)); err != nil {
		t.Fatal(err)
	}
	return r
}

// A verdict of Envoy's is kept by content: the same content judged again
// does not run Envoy again, other content does, and the cache keeps only
// its size of verdicts, forgetting the oldest.
func TestJudgeCachesVerdicts(t *testing.T) {
	envoy := realenvoy.Require(t)
	ctx := context.Background()
	j := envoyjudge.New(ctx, envoyjudge.Options{Envoy: envoy, Concurrency: 2, Timeout: realenvoy.JudgeTimeout, CacheSize: 2})
	if err := j.Unavailable(); err != nil {
		t.Fatal(err)
	}
	var refused envoyload.Resources
	if err := refused.Add("clusters", []byte(`{"name": "c", "type": "STATIC", "connect_timeout": "1s", "health_checks": [{"timeout": "1s", "interval": "10s", "unhealthy_threshold": 1, "healthy_threshold": 1, "grpc_health_check": {}}]}`)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		r    envoyload.Resources
		want envoyjudge.Outcome
		runs int64
	}{
		{"a", cluster(t, "a"), envoyjudge.Loaded, 1},
		{"a again", cluster(t, "a"), envoyjudge.Loaded, 1},
		{"refused", refused, envoyjudge.Refused, 2},
		{"refused again", refused, envoyjudge.Refused, 2},
		{"b, which forgets a", cluster(t, "b"), envoyjudge.Loaded, 3},
		{"refused, still kept", refused, envoyjudge.Refused, 3},
		{"a, forgotten", cluster(t, "a"), envoyjudge.Loaded, 4},
	}
	for _, s := range steps {
		v := j.Judge(ctx, s.r)
		if v.Outcome != s.want || j.Runs() != s.runs {
			t.Errorf("%s: %+v after %d runs of Envoy; want %s after %d", s.name, v, j.Runs(), s.want, s.runs)
		}
	}
	if v := j.Judge(ctx, refused); !strings.Contains(v.Message, "refuses to load it: c cluster must support HTTP/2 for gRPC healthchecking") {
		t.Errorf("refusal %q does not give Envoy's words", v.Message)
	}
}

// A load that takes longer than the timeout is refused, saying so, and its
// verdict is not kept: the next judgement runs Envoy again.
func TestJudgeTimeoutRefuses(t *testing.T) {
	envoy := realenvoy.Stalling(t)
	ctx := context.Background()
	j := envoyjudge.New(ctx, envoyjudge.Options{Envoy: envoy, Concurrency: 1, Timeout: 200 * time.Millisecond})
	if err := j.Unavailable(); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 2; i++ {
		v := j.Judge(ctx, cluster(t, "a"))
		if v.Outcome != envoyjudge.TimedOut || !v.Refuses() || !strings.Contains(v.Message, "Envoy did not finish loading it within 200ms") {
			t.Errorf("judgement %d: %+v; want it refused for the timeout", i, v)
		}
		if j.Runs() != i {
			t.Errorf("judgement %d: Envoy ran %d times", i, j.Runs())
		}
	}
}

// No more Envoys run at once than the cap: while one load holds the only
// turn, another waits, and is refused when its time is up, without
// running Envoy.
func TestJudgeConcurrencyCap(t *testing.T) {
	envoy := realenvoy.Stalling(t)
	j := envoyjudge.New(context.Background(), envoyjudge.Options{Envoy: envoy, Concurrency: 1, Timeout: time.Hour})
	first, stop := context.WithCancel(context.Background())
	done := make(chan envoyjudge.Verdict)
	go func() { done <- j.Judge(first, cluster(t, "a")) }()
	testenv.Eventually(t, "the first load to run", func() (bool, error) {
		_, err := os.Stat(realenvoy.Running(envoy))
		return err == nil, nil
	})
	second, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	v := j.Judge(second, cluster(t, "b"))
	if v.Outcome != envoyjudge.TimedOut || !strings.Contains(v.Message, "did not get a turn to load it") || !strings.Contains(v.Message, "at most 1 load at once") {
		t.Errorf("the second load: %+v; want it refused for want of a turn", v)
	}
	if j.Runs() != 1 {
		t.Errorf("Envoy ran %d times; want once, for the first load", j.Runs())
	}
	stop()
	if v := <-done; v.Outcome != envoyjudge.Unjudged {
		t.Errorf("the first load, cancelled: %+v", v)
	}
}

// Without an Envoy the judge says so, in every verdict and in the metric of
// availability, and runs nothing.
func TestJudgeWithoutEnvoy(t *testing.T) {
	ctx := context.Background()
	j := envoyjudge.New(ctx, envoyjudge.Options{Envoy: "no-such-envoy", Concurrency: 1, Timeout: time.Second})
	err := j.Unavailable()
	if err == nil || !strings.Contains(err.Error(), "no Envoy to load EnvoyConfigs in (--envoy-path no-such-envoy)") {
		t.Fatalf("Unavailable: %v", err)
	}
	if got := gauge(t, "kube_envoy_controller_envoy_validation_available"); got != 0 {
		t.Errorf("kube_envoy_controller_envoy_validation_available = %v, want 0", got)
	}
	v := j.Judge(ctx, cluster(t, "a"))
	if v.Outcome != envoyjudge.Unjudged || v.Refuses() || v.Message != err.Error() || j.Runs() != 0 {
		t.Errorf("%+v after %d runs; want it unjudged, saying why", v, j.Runs())
	}
	// Something that runs but is not an Envoy is no Envoy either.
	notEnvoy := envoyjudge.New(ctx, envoyjudge.Options{Envoy: "true", Concurrency: 1, Timeout: time.Second})
	if err := notEnvoy.Unavailable(); err == nil || !strings.Contains(err.Error(), "is not an Envoy") {
		t.Errorf("true as Envoy: %v", err)
	}
	stalling := envoyjudge.New(ctx, envoyjudge.Options{Envoy: realenvoy.Stalling(t), Concurrency: 1, Timeout: time.Second})
	if err := stalling.Unavailable(); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, "kube_envoy_controller_envoy_validation_available"); got != 1 {
		t.Errorf("with an Envoy: kube_envoy_controller_envoy_validation_available = %v, want 1", got)
	}
}

// gauge is the value of the gauge named name on the manager's registry.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal(errors.New(name + " is not registered"))
	return 0
}

// A listener for proxyless gRPC clients (an api_listener, which Envoy has
// no extension for) is judged by its connection manager, which is what such
// a client builds: one Envoy takes loads, one it refuses is refused.
func TestJudgeAPIListener(t *testing.T) {
	envoy := realenvoy.Require(t)
	ctx := context.Background()
	j := envoyjudge.New(ctx, envoyjudge.Options{Envoy: envoy, Concurrency: 1, Timeout: realenvoy.JudgeTimeout})
	apiListener := func(header string) examplev1.EnvoyResources {
		return examplev1.EnvoyResources{Listeners: []runtime.RawExtension{{Raw: []byte(`{"name": "greeter", "api_listener": {"api_listener": {
  "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": "greeter",
  "route_config": {"name": "greeter", "virtual_hosts": [{"name": "greeter", "domains": ["*"], "request_headers_to_add": [{"header": {"key": "` + header + `", "value": "v"}}],
    "routes": [{"match": {"prefix": ""}, "route": {"cluster": "backend"}}]}]},
  "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}}`)}}}
	}
	for header, want := range map[string]envoyjudge.Outcome{"x-greeting": envoyjudge.Loaded, "host": envoyjudge.Refused} {
		r, err := envoyload.FromSpec(apiListener(header))
		if err != nil {
			t.Fatal(err)
		}
		if v := j.Judge(ctx, r); v.Outcome != want {
			t.Errorf("adding header %s: %+v; want %s", header, v, want)
		}
	}
}

// Envoy checks, as it loads some resources, that a cluster they name
// exists: an EnvoyConfig loaded alone is loaded beside stand-ins of the
// fleet's clusters it names, and is refused for a cluster the fleet lacks.
func TestJudgeWithTheFleetsClusters(t *testing.T) {
	envoy := realenvoy.Require(t)
	ctx := context.Background()
	j := envoyjudge.New(ctx, envoyjudge.Options{Envoy: envoy, Concurrency: 1, Timeout: realenvoy.JudgeTimeout})
	res := examplev1.EnvoyResources{Listeners: []runtime.RawExtension{{Raw: []byte(`{"name": "traced", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}},
  "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    "stat_prefix": "traced", "rds": {"route_config_name": "r", "config_source": {"ads": {}}},
    "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig",
      "collector_cluster": "collector", "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON"}}},
    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`)}}}
	r, err := envoyload.FromSpec(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		fleet []string
		want  envoyjudge.Outcome
	}{
		{nil, envoyjudge.Refused},
		{[]string{"unrelated"}, envoyjudge.Refused},
		{[]string{"collector", "unrelated"}, envoyjudge.Loaded},
	} {
		if v := j.Judge(ctx, r.WithClusters(tt.fleet)); v.Outcome != tt.want {
			t.Errorf("beside the fleet's clusters %q: %+v; want %s", tt.fleet, v, tt.want)
		}
	}
	if got := r.WithClusters([]string{"collector", "unrelated"}); len(got.List("clusters")) != 1 {
		t.Errorf("stand-ins for %d clusters; want one, for the one it names", len(got.List("clusters")))
	}
}
