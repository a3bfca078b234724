package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// printDiff writes r in format: text for people, json or yaml whole.
func printDiff(w io.Writer, format string, r diffReport) error {
	if format != outputText {
		if r.Fleets == nil {
			r.Fleets = []fleetDiff{}
		}
		return printObject(w, format, r)
	}
	var b strings.Builder
	for _, f := range r.Fleets {
		fmt.Fprintf(&b, "fleet %s: version %s -> %s\n", f.Fleet, orDash(short(f.Version)), orDash(short(f.NewVersion)))
		if len(f.Types) == 0 {
			b.WriteString("  no change to what its proxies are served\n")
		}
		for _, t := range f.Types {
			writeType(&b, t)
		}
		for _, n := range f.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	if len(r.Refused) > 0 {
		if len(r.Fleets) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("admission would refuse:\n")
		for _, x := range r.Refused {
			if x.Where != "" {
				fmt.Fprintf(&b, "  %s: %s\n", x.Where, x.Message)
			} else {
				fmt.Fprintf(&b, "  %s\n", x.Message)
			}
		}
	}
	if len(r.EnvoyRefused) > 0 {
		b.WriteString("\nEnvoy would refuse:\n")
		for _, x := range r.EnvoyRefused {
			fmt.Fprintf(&b, "  %s: %s\n", x.Where, x.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeType(b *strings.Builder, t typeDiff) {
	var counts []string
	for _, c := range []struct {
		n    int
		what string
	}{{len(t.Added), "added"}, {len(t.Removed), "removed"}, {len(t.Changed), "changed"}} {
		if c.n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	fmt.Fprintf(b, "  %s: %s\n", t.Type, strings.Join(counts, ", "))
	for _, a := range t.Added {
		fmt.Fprintf(b, "    + %s\n", a.Name)
		var js bytes.Buffer
		if err := json.Indent(&js, a.Resource, "        ", "  "); err != nil {
			js.Reset()
			js.Write(a.Resource)
		}
		fmt.Fprintf(b, "        %s\n", js.String())
	}
	for _, name := range t.Removed {
		fmt.Fprintf(b, "    - %s\n", name)
	}
	for _, c := range t.Changed {
		fmt.Fprintf(b, "    ~ %s\n", c.Name)
		for _, f := range c.Fields {
			switch {
			case f.Old == nil:
				fmt.Fprintf(b, "        + %s: %s\n", f.Path, f.New)
			case f.New == nil:
				fmt.Fprintf(b, "        - %s: %s\n", f.Path, f.Old)
			default:
				fmt.Fprintf(b, "        ~ %s: %s -> %s\n", f.Path, f.Old, f.New)
			}
		}
	}
}
