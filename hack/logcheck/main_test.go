package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var rule = Rule{MaxRepeats: 20, Window: 10 * time.Second}

var t0 = time.Date(2025, 11, 22, 8, 0, 0, 0, time.UTC)

// zapLine is a line as the operator logs it (controller-runtime's zap, JSON).
func zapLine(at time.Time, level, msg, extra string) string {
	return fmt.Sprintf(`{"level":%q,"ts":%q,"msg":%q%s}`, level, at.Format(time.RFC3339Nano), msg, extra)
}

// reconcileError is controller-runtime's log of a failed reconcile of one object.
func reconcileError(at time.Time, name, err string) string {
	return zapLine(at, "error", "Reconciler error", fmt.Sprintf(
		`,"controller":"envoy","controllerGroup":"example.com","controllerKind":"Envoy","Envoy":{"name":%q,"namespace":"e2e"},"namespace":"e2e","name":%q,"reconcileID":"%d","error":%q,"stacktrace":"sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller).reconcileHandler\n\t/go/pkg/mod/controller.go:316"`,
		name, name, at.UnixNano(), err))
}

const start = `{"level":"info","ts":"2025-11-22T08:00:00Z","logger":"setup","msg":"starting manager","controllers":["envoy","foo"]}`

func TestCheck(t *testing.T) {
	conflict := `Operation cannot be fulfilled on envoys.example.com "edge": the object has been modified; please apply your changes to the latest version and try again`
	tests := []struct {
		name string
		log  []string
		want []string // the kinds of the findings, in order
	}{{
		name: "a clean run",
		log: []string{start,
			zapLine(t0.Add(time.Second), "info", "Starting Controller", `,"controller":"envoy"`),
			reconcileError(t0.Add(2*time.Second), "edge", conflict),
		},
	}, {
		name: "a lasting error under controller-runtime's backoff",
		log: func() []string {
			log := []string{start}
			// 5 ms, doubling: the 12th retry is 10.2 s after the first error.
			d := 5 * time.Millisecond
			at := t0
			for range 16 {
				log = append(log, reconcileError(at, "edge", `namespaces "e2e" is being terminated`))
				at = at.Add(d)
				d *= 2
			}
			return log
		}(),
	}, {
		name: "an error retried without backoff",
		log: func() []string {
			log := []string{start}
			for i := range 30 {
				log = append(log, reconcileError(t0.Add(time.Duration(i)*100*time.Millisecond), "edge", conflict))
			}
			return log
		}(),
		want: []string{"hot loop"},
	}, {
		name: "the same error spread over minutes",
		log: func() []string {
			log := []string{start}
			for i := range 60 {
				log = append(log, reconcileError(t0.Add(time.Duration(i)*time.Second), "edge", conflict))
			}
			return log
		}(),
	}, {
		name: "one error of many objects at once",
		log: func() []string {
			log := []string{start}
			for i := range 50 {
				log = append(log, reconcileError(t0, fmt.Sprintf("fleet-%d", i), "connection refused"))
			}
			return log
		}(),
	}, {
		name: "an info message repeated is not an error",
		log: func() []string {
			log := []string{start}
			for range 50 {
				log = append(log, zapLine(t0, "info", "pushed", `,"fleet":"e2e/edge"`))
			}
			return log
		}(),
	}, {
		name: "client-go's errors in a hot loop (klog)",
		log: func() []string {
			log := []string{start}
			for i := range 25 {
				log = append(log, fmt.Sprintf(`E1122 08:00:%02d.%06d   12345 reflector.go:158] "Unhandled Error" err="failed to list *v1.Pod: connection refused"`, i/5, (i%5)*1000))
			}
			return log
		}(),
		want: []string{"hot loop"},
	}, {
		name: "a hot loop is reported once",
		log: func() []string {
			log := []string{start}
			for i := range 100 {
				log = append(log, reconcileError(t0.Add(time.Duration(i)*10*time.Millisecond), "edge", conflict))
			}
			return log
		}(),
		want: []string{"hot loop"},
	}, {
		name: "a recovered reconciler panic",
		log: []string{start,
			`E1122 08:00:01.000000   12345 runtime.go:142] "Observed a panic" panic="runtime error: invalid memory address or nil pointer dereference" stacktrace=<`,
			`	goroutine 123 [running]:`,
			reconcileError(t0.Add(time.Second), "edge", "panic: runtime error: invalid memory address or nil pointer dereference [recovered]"),
		},
		want: []string{"panic", "panic"},
	}, {
		name: "a crash",
		log: []string{start,
			`panic: runtime error: index out of range [3] with length 3`,
			``,
			`goroutine 1 [running]:`,
			`main.main()`,
			`	/src/cmd/kube-envoy-controller/main.go:30 +0x1d`,
		},
		want: []string{"panic"},
	}, {
		name: "a data race",
		log: []string{start,
			`==================`,
			`WARNING: DATA RACE`,
			`Write at 0x00c0001a2b38 by goroutine 87:`,
			`  github.com/kube-envoy-controller/kube-envoy-controller/internal/xds.(*Tracker).closed()`,
			`==================`,
		},
		want: []string{"data race"},
	}, {
		name: "a runtime fatal error",
		log:  []string{start, `fatal error: concurrent map writes`},
		want: []string{"fatal error"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Check(strings.NewReader(strings.Join(tt.log, "\n")+"\n"), rule)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rep.Findings {
				got = append(got, f.Kind)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("findings %v, want kinds %v", rep.Findings, tt.want)
			}
			if rep.Lines != len(tt.log) {
				t.Errorf("read %d lines of %d", rep.Lines, len(tt.log))
			}
		})
	}
}

func TestCheckEmptyLog(t *testing.T) {
	for _, log := range []string{"", "\n", "some text that is no log entry\n"} {
		if _, err := Check(strings.NewReader(log), rule); err == nil {
			t.Errorf("log %q: no error", log)
		}
	}
}

// A stack trace is a single JSON line of many kilobytes: it is read whole.
func TestCheckLongLine(t *testing.T) {
	long := zapLine(t0, "error", "Reconciler error", `,"stacktrace":"`+strings.Repeat("x", 1<<20)+`"`)
	rep, err := Check(strings.NewReader(start+"\n"+long+"\n"+`fatal error: out of memory`), rule)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Entries != 2 || rep.Errors != 1 || len(rep.Findings) != 1 || rep.Findings[0].Line != 3 {
		t.Errorf("report %+v", rep)
	}
}

func TestFindingLine(t *testing.T) {
	rep, err := Check(strings.NewReader(start+"\nok\npanic: boom\n"), rule)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Line != 3 || rep.Findings[0].Text != "panic: boom" {
		t.Errorf("findings %+v", rep.Findings)
	}
}
