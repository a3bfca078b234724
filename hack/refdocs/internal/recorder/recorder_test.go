package recorder

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestRecordsWhatIsRegistered(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "recorder_test_total", Help: "h"})
	f := prometheus.CollectorFunc(func(chan<- prometheus.Metric) {}) // not comparable, describes nothing
	ctrlmetrics.Registry.MustRegister(c, f)
	if n := count(c); n != 1 {
		t.Fatalf("recorded %d times, want once", n)
	}
	if err := Check("recorder_test_"); err != nil {
		t.Error(err)
	}
	if !ctrlmetrics.Registry.Unregister(c) {
		t.Fatal("not unregistered")
	}
	if n := count(c); n != 0 {
		t.Errorf("still recorded %d times once unregistered", n)
	}
}

func count(c prometheus.Collector) int {
	n := 0
	for _, o := range Collectors() {
		if descriptors(o) == descriptors(c) {
			n++
		}
	}
	return n
}
