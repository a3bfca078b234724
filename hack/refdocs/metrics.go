package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metric is what a collector's descriptor says of one metric.
type metric struct {
	Name, Type, Help string
	Labels           []string
}

// descString matches what (*prometheus.Desc).String prints, which is all a
// Desc tells of itself: name, help, unit, constant labels, variable labels.
var descString = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// constLabel matches one of the constant labels of a Desc's String.
var constLabel = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*="(?:[^"\\]|\\.)*"`)

// describe returns the metrics a collector describes whose names start
// with prefix, with their type.
func describe(c prometheus.Collector, prefix string) ([]metric, error) {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var out []metric
	for d := range ch {
		if d.Err() != nil {
			return nil, d.Err()
		}
		m := descString.FindStringSubmatch(d.String())
		if m == nil {
			return nil, fmt.Errorf("a descriptor of an unknown form: %s", d)
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			return nil, err
		}
		help, err := strconv.Unquote(m[2])
		if err != nil {
			return nil, err
		}
		var labels []string
		if m[4] != "" {
			for _, l := range strings.Split(m[4], ",") {
				// c(name): a label with a constraint.
				l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")")
				labels = append(labels, l)
			}
		}
		labels = append(labels, constLabel.FindAllString(m[3], -1)...) // name="value"
		if strings.HasPrefix(name, prefix) {
			out = append(out, metric{Name: name, Help: help, Labels: labels})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	typ, err := metricType(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", out[0].Name, err)
	}
	for i := range out {
		out[i].Type = typ
	}
	return out, nil
}

// metricType is the type of a collector's metrics: that of the vector, or of
// the one metric a plain collector reports.
func metricType(c prometheus.Collector) (string, error) {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter", nil
	case *prometheus.GaugeVec:
		return "gauge", nil
	case *prometheus.HistogramVec:
		return "histogram", nil
	case *prometheus.SummaryVec:
		return "summary", nil
	}
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	types := map[string]bool{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			return "", err
		}
		switch {
		case pb.Counter != nil:
			types["counter"] = true
		case pb.Gauge != nil:
			types["gauge"] = true
		case pb.Histogram != nil:
			types["histogram"] = true
		case pb.Summary != nil:
			types["summary"] = true
		default:
			types["untyped"] = true
		}
	}
	if len(types) != 1 {
		return "", fmt.Errorf("a collector of %d types of metrics; want one", len(types))
	}
	for t := range types {
		return t, nil
	}
	panic("unreachable")
}

// metricsTable lists the metrics of the collectors whose names start with
// prefix, by name.
func metricsTable(cs []prometheus.Collector, prefix string) (string, error) {
	var ms []metric
	for _, c := range cs {
		d, err := describe(c, prefix)
		if err != nil {
			return "", err
		}
		ms = append(ms, d...)
	}
	if len(ms) == 0 {
		return "", fmt.Errorf("no metric named %s… is registered", prefix)
	}
	slices.SortFunc(ms, func(a, b metric) int { return strings.Compare(a.Name, b.Name) })
	var rows [][]string
	for _, m := range ms {
		var labels []string
		for _, l := range m.Labels {
			labels = append(labels, code(l))
		}
		rows = append(rows, []string{code(m.Name), m.Type, strings.Join(labels, ", "), cell(m.Help)})
	}
	return table([]string{"metric", "type", "labels", "help"}, rows), nil
}
