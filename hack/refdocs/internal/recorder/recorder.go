// Package recorder records the Prometheus collectors that the operator's
// packages register on controller-runtime's registry, which serves them on
// /metrics: the registry forwards them but cannot list them, and most are
// vectors that report nothing before their first series.
//
// It must replace the registry before those packages register their
// collectors, in their init functions. Go initializes, among the packages
// whose imports are initialized, the first by import path; this package's
// path (…/hack/refdocs/internal/recorder) sorts before the operator's
// (…/internal/…), and it imports only the registry's package, so it is
// initialized before them. Check tells when that no longer holds.
package recorder

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// registry forwards to controller-runtime's registry and records what is
// registered.
type registry struct {
	ctrlmetrics.RegistererGatherer
	mu         sync.Mutex
	collectors []prometheus.Collector
}

var recorded = &registry{RegistererGatherer: ctrlmetrics.Registry}

func init() { ctrlmetrics.Registry = recorded }

func (r *registry) Register(c prometheus.Collector) error {
	if err := r.RegistererGatherer.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister forgets the collectors that describe what c describes, as the
// registry does (collectors need not be comparable).
func (r *registry) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := descriptors(c)
	r.collectors = slices.DeleteFunc(r.collectors, func(o prometheus.Collector) bool { return descriptors(o) == key })
	return r.RegistererGatherer.Unregister(c)
}

// descriptors identifies a collector by what it describes.
func descriptors(c prometheus.Collector) string {
	var ds []string
	for _, d := range describe(c) {
		ds = append(ds, d.String())
	}
	slices.Sort(ds)
	return strings.Join(ds, "\n")
}

// describe returns a collector's descriptors.
func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}

// Collectors returns the collectors registered since this package was
// initialized, in the order they were.
func Collectors() []prometheus.Collector {
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	return slices.Clone(recorded.collectors)
}

// Check fails when the registry serves a metric whose name starts with
// prefix that no recorded collector describes: one registered before this
// package was initialized.
func Check(prefix string) error {
	described := map[string]bool{}
	for _, c := range Collectors() {
		for _, d := range describe(c) {
			described[d.String()] = true
		}
	}
	families, err := recorded.Gather()
	if err != nil {
		return err
	}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		found := false
		for d := range described {
			if strings.Contains(d, fmt.Sprintf("fqName: %q", name)) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("metric %s was registered before the recorder was initialized: the metric reference would leave it out", name)
		}
	}
	return nil
}
