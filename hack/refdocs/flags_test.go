package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/cmdline"
)

func TestFlagsTable(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("zeta", "", "Last | by name.")
	fs.Duration("alpha", 2*time.Second, "First\nby name.")
	fs.Bool("mid", false, "A bool.")
	want := "| flag | default | meaning |\n|---|---|---|\n" +
		"| `--alpha` | `2s` | First by name. |\n" +
		"| `--mid` | `false` | A bool. |\n" +
		"| `--zeta` |  | Last \\| by name. |\n"
	if got := flagsTable(fs); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Every flag of the binary is in the table, with its usage string.
func TestFlagsTableOfTheBinary(t *testing.T) {
	fs := flag.NewFlagSet("kube-envoy-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cmdline.Register(fs, "")
	got := flagsTable(fs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(got, "| `--"+f.Name+"` | "+code(f.DefValue)+" | "+cell(f.Usage)+" |\n") {
			t.Errorf("--%s is not in the table as it is registered", f.Name)
		}
	})
	if lines := strings.Count(got, "\n") - 2; lines != n || n < 40 {
		t.Errorf("%d rows for %d flags", lines, n)
	}
}
