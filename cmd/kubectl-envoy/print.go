package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Output formats (-o).
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// versionWidth is how much of a version (a 16 hex digit hash) the table shows.
const versionWidth = 8

// maxNACKColumn bounds the NACK detail in the table; json and yaml show it whole.
const maxNACKColumn = 60

// sortRows orders rows by fleet, node and replica.
func sortRows(rows []debug.ProxyRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Fleet != b.Fleet {
			return a.Fleet < b.Fleet
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Replica < b.Replica
	})
}

// printRows writes rows in format; now is the clock LAST SEEN is measured against.
func printRows(w io.Writer, format string, rows []debug.ProxyRow, now time.Time) error {
	switch format {
	case outputJSON, outputYAML:
		return printObject(w, format, map[string]any{"proxies": rows})
	case outputTable, "":
	default:
		return fmt.Errorf("unknown output format %q: want table, json or yaml", format)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No proxies found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	header := []string{"NODE", "FLEET", "REPLICA"}
	for _, k := range resource.Kinds { // a column per type, e.g. LDS
		header = append(header, k.Short+" SENT/ACKED")
	}
	header = append(header, "STATE", "NACK", "LAST SEEN")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := []string{r.Node, r.Fleet, r.Replica}
		for _, k := range resource.Kinds {
			cells = append(cells, typeCell(r, k.Field))
		}
		cells = append(cells, string(r.State), orDash(oneLine(r.NACK, maxNACKColumn)), duration.HumanDuration(now.Sub(r.LastSeen))+" ago")
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// typeCell is "sent/acked" for a type the proxy asked for, with a mark
// when its state is not SYNCED, and "-" for a type it did not ask for.
func typeCell(r debug.ProxyRow, field string) string {
	for _, t := range r.Types {
		if t.Type != field {
			continue
		}
		cell := short(t.Sent) + "/" + short(t.Acked)
		if t.State != debug.Synced {
			cell += " (" + string(t.State) + ")"
		}
		return cell
	}
	return "-"
}

func short(v string) string {
	if v == "" {
		return "-"
	}
	if len(v) > versionWidth {
		return v[:versionWidth]
	}
	return v
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine makes s one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// printObject writes v as JSON or YAML.
func printObject(w io.Writer, format string, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	switch format {
	case outputJSON:
		_, err = fmt.Fprintln(w, string(js))
	case outputYAML:
		var y []byte
		if y, err = yaml.JSONToYAML(js); err == nil {
			_, err = w.Write(y)
		}
	default:
		err = fmt.Errorf("unknown output format %q: want json or yaml", format)
	}
	return err
}

// versionLine is one line of `kubectl envoy version`.
type versionLine struct {
	Component string `json:"component"`
	Replica   string `json:"replica,omitempty"`
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Error     string `json:"error,omitempty"`
}

func printVersions(w io.Writer, format string, lines []versionLine) error {
	switch format {
	case outputJSON, outputYAML:
		return printObject(w, format, map[string]any{"versions": lines})
	case outputTable, "":
	default:
		return fmt.Errorf("unknown output format %q: want table, json or yaml", format)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tREPLICA\tVERSION\tREVISION")
	for _, l := range lines {
		v := l.Version
		if l.Error != "" {
			v = "unknown (" + l.Error + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Component, orDash(l.Replica), v, orDash(l.Revision))
	}
	return tw.Flush()
}
