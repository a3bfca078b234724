// Package envoyjudge is the operator's judge of EnvoyConfigs: a real Envoy
// (envoyload.Validate) loads what admission and the leader are about to
// admit or record, within bounds (a cap on concurrent loads, a timeout, a
// cache of verdicts by content), and says so where it has no Envoy: in its
// verdicts, and in the operator's metrics. It stands apart from envoyload,
// which kubectl envoy links, so that the plugin links no metric.
package envoyjudge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/envoyload"
)

// Outcome is what a Judge answers of resources.
type Outcome string

const (
	// Loaded: Envoy loads them.
	Loaded Outcome = "loaded"
	// Refused: Envoy refuses them; the Verdict's Message is its words.
	Refused Outcome = "refused"
	// TimedOut: Envoy did not answer within the Judge's timeout. What
	// Envoy did not load is refused, as Refused is: the Message says why.
	TimedOut Outcome = "timeout"
	// Unjudged: no Envoy could judge them (none is at hand, or it could
	// not run); the Message says why. They are not known to load.
	Unjudged Outcome = "unjudged"
)

// Verdict is a Judge's answer.
type Verdict struct {
	Outcome Outcome
	// Message is Envoy's words when it refused, and otherwise why there is
	// no answer; empty when Envoy loaded them.
	Message string
}

// Refuses reports whether what was judged must not be admitted or served:
// Envoy refused it, or did not answer in time.
func (v Verdict) Refuses() bool { return v.Outcome == Refused || v.Outcome == TimedOut }

// Options configure a Judge.
type Options struct {
	// Envoy is the Envoy binary: a path, or a name looked up on PATH.
	Envoy string
	// Concurrency is how many Envoys run at once, at most; at least 1.
	Concurrency int
	// Timeout bounds one judgement: waiting for a turn among Concurrency,
	// and Envoy's run.
	Timeout time.Duration
	// CacheSize is how many verdicts are kept, by content; 0 is
	// DefaultCacheSize.
	CacheSize int
}

// Defaults of Options: the operator's flags' defaults.
const (
	// DefaultCacheSize is how many verdicts a Judge keeps unless told.
	DefaultCacheSize = 4096
	// DefaultConcurrency: Envoy takes one core while it loads, and the
	// operator's replica has others to serve.
	DefaultConcurrency = 2
	// DefaultTimeout: Envoy loads an EnvoyConfig in tens of milliseconds
	// (docs/benchmarks.md); the validating webhook answers within its own
	// timeout of 5s, with time to spare for the API server's round trip and
	// for a turn among DefaultConcurrency under load.
	DefaultTimeout = 3 * time.Second
)

// Judge has a real Envoy load resources (envoyload.Validate) and answers with its
// verdict, within bounds: at most Concurrency Envoys run at once, a
// judgement takes at most Timeout (and is refused, TimedOut, past it), and
// the verdicts Envoy gave (Loaded and Refused, which depend on the content
// alone) are kept by a hash of the content, the CacheSize most recent, so
// that the same content is judged by Envoy once. Where no Envoy is at hand
// (Unavailable), every verdict is Unjudged and says why. A Judge is safe
// for concurrent use.
type Judge struct {
	envoy, version string
	unavailable    error
	timeout        time.Duration
	turns          chan struct{}
	runs           atomic.Int64

	mu       sync.Mutex
	verdicts map[string]Verdict
	order    []string // the keys of verdicts, oldest first
	size     int
}

// New returns a Judge with o's Envoy, once it has checked that it is an
// Envoy that runs (envoyload.Version). When it is not, the Judge says why in
// Unavailable and judges nothing. It sets the metric of availability.
func New(ctx context.Context, o Options) *Judge {
	j := &Judge{timeout: o.Timeout, turns: make(chan struct{}, max(o.Concurrency, 1)),
		verdicts: map[string]Verdict{}, size: o.CacheSize}
	if j.size <= 0 {
		j.size = DefaultCacheSize
	}
	j.envoy, j.unavailable = lookPath(o.Envoy)
	if j.unavailable == nil {
		vctx, cancel := context.WithTimeout(ctx, max(o.Timeout, 10*time.Second))
		j.version, j.unavailable = envoyload.Version(vctx, j.envoy)
		cancel()
	}
	if j.unavailable != nil {
		j.unavailable = fmt.Errorf("no Envoy to load EnvoyConfigs in (--envoy-path %s): %w", o.Envoy, j.unavailable)
		metricAvailable.Set(0)
	} else {
		metricAvailable.Set(1)
	}
	return j
}

// lookPath returns the absolute path of the Envoy named: a path, or a name
// on PATH. Envoy runs in a directory of its own, where a relative path
// would be read from.
func lookPath(name string) (string, error) {
	if name == "" {
		return "", errors.New("no Envoy was given")
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return filepath.Abs(path)
}

// Unavailable is why the Judge judges nothing, or nil when it has an Envoy.
func (j *Judge) Unavailable() error { return j.unavailable }

// Envoy is the path of the Judge's Envoy, and its release; empty when it
// has none.
func (j *Judge) Envoy() (path, version string) { return j.envoy, j.version }

// Concurrency is how many Envoys the Judge runs at once, at most.
func (j *Judge) Concurrency() int { return cap(j.turns) }

// Runs is how many times the Judge has run Envoy.
func (j *Judge) Runs() int64 { return j.runs.Load() }

// Judge answers whether Envoy loads r.
func (j *Judge) Judge(ctx context.Context, r envoyload.Resources) Verdict {
	if j.unavailable != nil {
		metricValidations.WithLabelValues(string(Unjudged)).Inc()
		return Verdict{Outcome: Unjudged, Message: j.unavailable.Error()}
	}
	key := r.Digest()
	if v, ok := j.cached(key); ok {
		metricCacheHits.Inc()
		return v
	}
	v := j.run(ctx, r)
	metricValidations.WithLabelValues(string(v.Outcome)).Inc()
	if v.Outcome == Loaded || v.Outcome == Refused {
		j.keep(key, v)
	}
	return v
}

// run has Envoy load r, in its turn, within the timeout.
func (j *Judge) run(ctx context.Context, r envoyload.Resources) Verdict {
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	timedOut := func(what string) Verdict {
		return Verdict{Outcome: TimedOut, Message: fmt.Sprintf(
			"Envoy did not %s within %s (--envoy-validation-timeout; at most %d load at once, --envoy-validation-concurrency), so it is refused: what Envoy has not loaded is not admitted",
			what, j.timeout, cap(j.turns))}
	}
	select {
	case j.turns <- struct{}{}:
		defer func() { <-j.turns }()
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return timedOut("get a turn to load it")
		}
		return Verdict{Outcome: Unjudged, Message: ctx.Err().Error()}
	}
	dir, err := os.MkdirTemp("", "envoyload-")
	if err != nil {
		return Verdict{Outcome: Unjudged, Message: err.Error()}
	}
	defer func() { _ = os.RemoveAll(dir) }()
	j.runs.Add(1)
	start := time.Now()
	err = envoyload.Validate(ctx, j.envoy, dir, r)
	metricDuration.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		return Verdict{Outcome: Loaded}
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return timedOut("finish loading it")
	case errors.Is(err, envoyload.ErrRefused):
		return Verdict{Outcome: Refused, Message: fmt.Sprintf("Envoy %s refuses to load it: %s", j.version, envoyload.Words(err))}
	}
	return Verdict{Outcome: Unjudged, Message: err.Error()}
}

func (j *Judge) cached(key string) (Verdict, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	v, ok := j.verdicts[key]
	return v, ok
}

// keep keeps v as key's verdict, forgetting the oldest beyond the size.
func (j *Judge) keep(key string, v Verdict) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.verdicts[key]; ok {
		return
	}
	j.verdicts[key] = v
	j.order = append(j.order, key)
	for len(j.order) > j.size {
		delete(j.verdicts, j.order[0])
		j.order = j.order[1:]
	}
}
