// Package measure reads the sources of the benchmarks' figures: the API
// server's audit log, Prometheus metrics, /proc/PID/status and a Go heap
// profile, and the sizes a run is asked for. Each reader fails when its
// source lacks what it is asked for, instead of returning a zero that would
// read as a result.
package measure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sizes parses a comma-separated list of positive integers, such as
// BENCH_ENVOY_SIZES. Anything else is an error: a size that is silently
// dropped would make a row of zeros.
func Sizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want comma-separated sizes of at least 1, such as 100,1000", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// Size parses one positive integer.
func Size(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q: want a size of at least 1", s)
	}
	return n, nil
}

// AuditEvent is the part of an audit log line the benchmarks and the chaos
// suite read.
type AuditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	ResponseStatus           struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// ParseAudit parses an audit log, one JSON event a line. Every complete line
// must parse. A last line without its newline is one the API server is still
// writing and is left for the next read.
func ParseAudit(log []byte) ([]AuditEvent, error) {
	lines := bytes.Split(log, []byte("\n"))
	lines = lines[:len(lines)-1] // after the last newline: empty, or a line being written
	events := make([]AuditEvent, 0, len(lines))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev AuditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d: %v: %.200s", i+1, err, line)
		}
		events = append(events, ev)
	}
	return events, nil
}

// WriteFilter selects write requests: those sent to Namespace with a user
// agent starting with UserAgent, for one of Resources ("pods", "replicasets",
// …; a subresource counts with its resource).
type WriteFilter struct {
	Namespace string
	UserAgent string
	Resources []string
}

func (f WriteFilter) matches(ev AuditEvent) bool {
	r := ev.ObjectRef
	if ev.Stage != "ResponseComplete" || r.Namespace != f.Namespace || !strings.HasPrefix(ev.UserAgent, f.UserAgent) {
		return false
	}
	if f.Resources == nil {
		return true
	}
	for _, res := range f.Resources {
		if res == r.Resource {
			return true
		}
	}
	return false
}

// CountWrites counts the events that f selects, by "verb resource[/subresource]".
func CountWrites(events []AuditEvent, f WriteFilter) map[string]int {
	counts := map[string]int{}
	for _, ev := range events {
		if !f.matches(ev) {
			continue
		}
		key := ev.Verb + " " + ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			key += "/" + ev.ObjectRef.Subresource
		}
		counts[key]++
	}
	return counts
}

// ByResource sums counts of CountWrites by resource[/subresource], whatever
// the verb: what a controller costs the API server in each kind of write.
func ByResource(counts map[string]int) map[string]int {
	out := map[string]int{}
	for key, n := range counts {
		_, resource, ok := strings.Cut(key, " ")
		if !ok {
			resource = key
		}
		out[resource] += n
	}
	return out
}

// ParseMetrics parses Prometheus' text format.
func ParseMetrics(text []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(text))
}

// Series sums the series of a metric family that carry the given labels.
type Series struct {
	Matched int     // how many series matched
	Value   float64 // counters and gauges: the sum of their values
	Count   float64 // histograms and summaries: the sum of their counts
	Sum     float64 // histograms and summaries: the sum of their sums
}

// ErrNoFamily is returned when a metric family is not in the output at all.
var ErrNoFamily = errors.New("no such metric")

// Sum adds up the series of the family name whose labels include labels. It
// fails with ErrNoFamily when the family is absent: a renamed metric must not
// read as zero.
func Sum(families map[string]*dto.MetricFamily, name string, labels map[string]string) (Series, error) {
	fam, ok := families[name]
	if !ok {
		return Series{}, fmt.Errorf("%w: %s", ErrNoFamily, name)
	}
	var s Series
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		s.Matched++
		switch {
		case m.Histogram != nil:
			s.Count += float64(m.Histogram.GetSampleCount())
			s.Sum += m.Histogram.GetSampleSum()
		case m.Summary != nil:
			s.Count += float64(m.Summary.GetSampleCount())
			s.Sum += m.Summary.GetSampleSum()
		case m.Counter != nil:
			s.Value += m.Counter.GetValue()
		case m.Gauge != nil:
			s.Value += m.Gauge.GetValue()
		case m.Untyped != nil:
			s.Value += m.Untyped.GetValue()
		}
	}
	return s, nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}

// ProcMemory is a process's resident memory from /proc/PID/status.
type ProcMemory struct {
	Peak    int64 // VmHWM: the most the process ever had resident, in bytes
	Current int64 // VmRSS, in bytes
}

// ParseProcStatus reads VmHWM and VmRSS from a /proc/PID/status. Both must be
// there.
func ParseProcStatus(status []byte) (ProcMemory, error) {
	var m ProcMemory
	var seen int
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" || (f[0] != "VmHWM:" && f[0] != "VmRSS:") {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return m, fmt.Errorf("%q: %v", line, err)
		}
		if f[0] == "VmHWM:" {
			m.Peak = kb << 10
			seen |= 1
		} else {
			m.Current = kb << 10
			seen |= 2
		}
	}
	if seen != 3 {
		return m, errors.New("no VmHWM and VmRSS lines in the process's status")
	}
	return m, nil
}

// ClockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ),
// which Linux fixes at 100 a second for every program it runs.
const ClockTicks = 100

// ParseProcStat reads the CPU time a process has used, in user and in
// system mode (utime and stime), from its /proc/PID/stat, in seconds. The
// second field, the command's name in parentheses, may hold spaces and
// parentheses itself: the fields are counted from the last ")".
func ParseProcStat(stat []byte) (float64, error) {
	s := string(stat)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, errors.New("no command name in the process's stat")
	}
	// After the name: state (field 3), ..., utime (14), stime (15).
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the process's name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("the process's utime and stime: %v", err)
	}
	return float64(utime+stime) / ClockTicks, nil
}

// HeapStats are the Go runtime's memory statistics at the end of a heap
// profile in text form (/debug/pprof/heap?debug=1).
type HeapStats struct {
	HeapAlloc int64 // bytes of allocated heap objects; right after a GC, the live heap
	HeapInuse int64 // bytes in in-use spans
	Sys       int64 // bytes obtained from the OS
	// StackInuse is the bytes of goroutine stacks ("# Stack = inuse / sys").
	StackInuse int64
	// NumForcedGC counts the GCs the program was asked for; that it grew
	// between two reads shows that the second one followed a GC.
	NumForcedGC int64
}

// ParseHeapProfile reads the "# HeapAlloc = N" lines of a text heap profile.
func ParseHeapProfile(profile []byte) (HeapStats, error) {
	var h HeapStats
	fields := map[string]*int64{"HeapAlloc": &h.HeapAlloc, "HeapInuse": &h.HeapInuse, "Sys": &h.Sys, "NumForcedGC": &h.NumForcedGC}
	seen := map[string]bool{}
	fields["Stack"] = &h.StackInuse
	for _, line := range strings.Split(string(profile), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok || !strings.HasPrefix(line, "# ") {
			continue
		}
		if name == "Stack" {
			value, _, _ = strings.Cut(value, " / ")
		}
		if p, ok := fields[name]; ok && !seen[name] {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return h, fmt.Errorf("%q: %v", line, err)
			}
			*p = n
			seen[name] = true
		}
	}
	for name := range fields {
		if !seen[name] {
			return h, fmt.Errorf("no %q in the heap profile: is it the text form (debug=1)?", "# "+name+" = ")
		}
	}
	return h, nil
}
