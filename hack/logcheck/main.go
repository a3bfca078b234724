// Command logcheck fails when an operator's log shows a panic, a data race or
// an error repeated in a hot loop; hack/e2e.sh runs it on the operator's log at
// the end of the run, since the operator can recover from a panic and carry on,
// and a race detector only reports.
//
//	go run ./hack/logcheck [-max-repeats 20] [-window 10s] LOG...
//
// A log line is a finding when it contains one of the markers (a Go panic,
// controller-runtime's or client-go's "Observed a panic", a race detector
// report, a Go runtime fatal error), or when the same error is logged more than
// -max-repeats times within -window.
//
// The hot-loop rule: controller-runtime retries a failing object with a
// per-object backoff that starts at 5 ms and doubles, so one object's lasting
// error is logged 11 times in its first 10 seconds and less often after that.
// More than 20 in 10 seconds means an error that is retried without backoff:
// a reconcile requeued at once, or triggered again by its own write. "The same
// error" is an error-level entry (JSON level error or above, or a klog E or F
// line) with the same message and fields, apart from its time and
// reconcileID: the same failure of the same object.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	rule := Rule{}
	flag.IntVar(&rule.MaxRepeats, "max-repeats", 20, "most times the same error may be logged within -window")
	flag.DurationVar(&rule.Window, "window", 10*time.Second, "the hot-loop window")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: logcheck [-max-repeats N] [-window D] LOG...")
		os.Exit(2)
	}
	failed := false
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		report, err := Check(f, rule)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		for _, fd := range report.Findings {
			fmt.Fprintf(os.Stderr, "%s:%d: %s: %s\n", path, fd.Line, fd.Kind, fd.Text)
			failed = true
		}
		if len(report.Findings) == 0 {
			fmt.Printf("%s: %d lines, %d log entries, %d errors: no panic, data race or hot loop\n",
				path, report.Lines, report.Entries, report.Errors)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// Rule is the hot-loop rule: more than MaxRepeats times the same error within Window.
type Rule struct {
	MaxRepeats int
	Window     time.Duration
}

// Finding is one problem in a log.
type Finding struct {
	Line int    // 1-based line number
	Kind string // "panic", "data race", "fatal error" or "hot loop"
	Text string
}

// Report is what Check found, with counts that show the log was read.
type Report struct {
	Lines, Entries, Errors int
	Findings               []Finding
}

// markers are the texts that fail a log wherever they appear.
var markers = []struct{ text, kind string }{
	{"WARNING: DATA RACE", "data race"},
	{"Observed a panic", "panic"},
	{"panic:", "panic"},
	{"fatal error:", "fatal error"},
}

// Check reads a log and returns its findings. A log without a single log
// entry fails: the operator logs as it starts, so an empty log means the
// output went elsewhere, not that all was well.
func Check(r io.Reader, rule Rule) (Report, error) {
	var rep Report
	type loop struct {
		times    []time.Time // of the entries within the window, oldest first
		reported bool
	}
	loops := map[string]*loop{}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			rep.Lines++
			line = strings.TrimRight(line, "\r\n")
			for _, m := range markers {
				if strings.Contains(line, m.text) {
					rep.Findings = append(rep.Findings, Finding{rep.Lines, m.kind, clip(line)})
					break
				}
			}
			if e, ok := parseEntry(line); ok {
				rep.Entries++
				if e.isError {
					rep.Errors++
					l := loops[e.key]
					if l == nil {
						l = &loop{}
						loops[e.key] = l
					}
					l.times = append(l.times, e.at)
					for len(l.times) > 0 && e.at.Sub(l.times[0]) > rule.Window {
						l.times = l.times[1:]
					}
					if len(l.times) > rule.MaxRepeats && !l.reported {
						l.reported = true
						rep.Findings = append(rep.Findings, Finding{rep.Lines, "hot loop",
							fmt.Sprintf("logged %d times within %s: %s", len(l.times), rule.Window, clip(e.key))})
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rep, err
		}
	}
	if rep.Entries == 0 {
		return rep, errors.New("no log entries: is this the operator's log?")
	}
	return rep, nil
}

type entry struct {
	at      time.Time
	isError bool
	key     string // what makes two errors the same
}

// parseEntry parses a JSON log line of the operator (zap) or a klog line
// (client-go's). Other lines, such as stack traces, are not entries.
func parseEntry(line string) (entry, bool) {
	if strings.HasPrefix(line, "{") {
		return parseJSON(line)
	}
	return parseKlog(line)
}

// volatile are the fields of a JSON entry that differ between two logs of the
// same failure.
var volatile = map[string]bool{"ts": true, "time": true, "reconcileID": true, "stacktrace": true}

func parseJSON(line string) (entry, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return entry{}, false
	}
	at, ok := parseTime(m["ts"])
	if !ok {
		return entry{}, false
	}
	level, _ := m["level"].(string)
	e := entry{at: at}
	switch level {
	case "error", "dpanic", "panic", "fatal":
		e.isError = true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !volatile[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v, _ := json.Marshal(m[k])
		fmt.Fprintf(&b, "%s=%s ", k, v)
	}
	e.key = strings.TrimSpace(b.String())
	return e, true
}

// parseTime reads zap's timestamps: RFC 3339 text, or seconds since the epoch.
func parseTime(v any) (time.Time, bool) {
	switch ts := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, ts)
		return t, err == nil
	case float64:
		sec := int64(ts)
		return time.Unix(sec, int64((ts-float64(sec))*1e9)), true
	}
	return time.Time{}, false
}

// parseKlog parses "Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg". The year
// is not in the line; only the time between entries matters here.
func parseKlog(line string) (entry, bool) {
	if len(line) < 22 || !strings.ContainsRune("IWEF", rune(line[0])) {
		return entry{}, false
	}
	at, err := time.Parse("0102 15:04:05.000000", line[1:21])
	if err != nil {
		return entry{}, false
	}
	i := strings.Index(line, "] ")
	if i < 0 {
		return entry{}, false
	}
	// The source location stays in the key: the same message from two
	// places is two errors.
	rest := strings.Fields(line[21:i])
	loc := ""
	if len(rest) > 0 {
		loc = rest[len(rest)-1]
	}
	return entry{at: at, isError: line[0] == 'E' || line[0] == 'F', key: loc + "] " + line[i+2:]}, true
}

func clip(s string) string {
	const n = 300
	if len(s) > n {
		return s[:n] + "… (" + strconv.Itoa(len(s)) + " bytes)"
	}
	return s
}
