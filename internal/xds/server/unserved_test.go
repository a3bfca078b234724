package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unservedCount returns metricUnserved's count of label.
func unservedCount(t *testing.T, label string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := metricUnserved.WithLabelValues(label).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// lines is a log that keeps the lines written to it.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.all = append(l.all, args)
		l.mu.Unlock()
	}, funcr.Options{})
}

// count returns how many lines hold s.
func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.all {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// A subscription to a type the server does not serve is counted once per
// stream and type, however often the stream asks for it again, by the
// type's label, and logged once per stream, with its node.
func TestUnservedTypesCountedAndLoggedOnce(t *testing.T) {
	log := &lines{}
	a := newAuthority(t)
	s, addr := startTLSServerWith(t, a, func(s *Server) { s.log = log.logger() })
	c := &conf{t: t, s: s, c: dialAs(t, addr, a, "ns", "edge")}
	c.publish(baseFleet(0))
	const logged = "a proxy asks for a type the xDS server does not serve"
	ecds, srds, other := unservedCount(t, "extension_config"), unservedCount(t, "scoped_route"), unservedCount(t, "other")

	for i, id := range []string{"p1", "p2"} {
		st := c.sotw(id)
		must(t, st.Subscribe(extensionConfigType, "a"))
		must(t, st.Subscribe(extensionConfigType, "a", "b"))
		must(t, st.Subscribe(scopedRouteType))
		must(t, st.Subscribe("type.googleapis.com/example.Unknown"))
		must(t, st.Subscribe(extensionConfigType, "b"))
		// Requests are handled in order: once the clusters are answered,
		// the requests before them were counted and logged.
		must(t, st.Subscribe(resourcev3.ClusterType))
		c.expect(st, resourcev3.ClusterType, "c1", "c2", "c3")
		n := float64(i + 1)
		if got := unservedCount(t, "extension_config") - ecds; got != n {
			t.Errorf("after %d streams: %v extension config subscriptions counted, want %v", i+1, got, n)
		}
		if got := unservedCount(t, "scoped_route") - srds; got != n {
			t.Errorf("after %d streams: %v scoped route subscriptions counted, want %v", i+1, got, n)
		}
		if got := unservedCount(t, "other") - other; got != n {
			t.Errorf("after %d streams: %v subscriptions to other types counted, want %v", i+1, got, n)
		}
		if got := log.count(logged); got != i+1 {
			t.Errorf("after %d streams: logged %d times, want %d", i+1, got, i+1)
		}
		if got := log.count(`"node"="` + id + `"`); got != 1 {
			t.Errorf("the log names node %s %d times, want once: %q", id, got, log.all)
		}
	}
}

// A type the server does not serve is bounded as a served one is: a
// subscription to more of its names than a stream may ends the stream,
// with ResourceExhausted, and so does a stream that asks for more such
// types than maxUnservedTypes.
func TestUnservedTypesBounded(t *testing.T) {
	a := newAuthority(t)
	s, addr := limited(t, a, func(l *Limits) { l.MaxNamesPerType = 100 })
	c := &conf{t: t, s: s, c: dialAs(t, addr, a, "ns", "edge")}
	c.publish(baseFleet(0))
	names := make([]string, 101)
	for i := range names {
		names[i] = fmt.Sprintf("filter-%d", i)
	}

	st := c.sotw("names")
	must(t, st.Subscribe(extensionConfigType, names...))
	_, err := st.Recv()
	wantCode(t, "101 names of a type not served", err, codes.ResourceExhausted)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "101 names of a type not served") {
		t.Errorf("refused with %q, want it to say whose names", msg)
	}

	d := c.delta("types")
	for i := range maxUnservedTypes + 1 {
		must(t, d.Subscribe(fmt.Sprintf("type.googleapis.com/example.T%d", i)))
	}
	_, err = d.Recv()
	wantCode(t, "a type past maxUnservedTypes", err, codes.ResourceExhausted)

	// Up to the bound, the stream is served.
	ok := c.delta("within")
	for i := range maxUnservedTypes {
		must(t, ok.Subscribe(fmt.Sprintf("type.googleapis.com/example.T%d", i)))
	}
	must(t, ok.Subscribe(resourcev3.ClusterType))
	c.expectDelta(ok, resourcev3.ClusterType, []string{"c1", "c2", "c3"}, nil)
}
