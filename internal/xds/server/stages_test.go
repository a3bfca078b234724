package server

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	dto "github.com/prometheus/client_model/go"
)

// stageObserved returns the count and sum of stage's observations.
func stageObserved(t *testing.T, s Stage) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := metricPushStage.WithLabelValues(string(s)).(interface{ Write(*dto.Metric) error }).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A PushTimer gives each stage the lap that Mark ends, the queue the time
// before its start, nothing to a lap Skip ends, and observes each stage
// marked once, and no other.
func TestPushTimer(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pt := startPush(func() time.Time { return clock })
	pt.Queued(clock.Add(-7 * time.Millisecond))
	step := func(d time.Duration) { clock = clock.Add(d) }
	step(time.Millisecond)
	pt.Mark(StageRead)
	step(2 * time.Millisecond)
	pt.Mark(StageTranslate)
	step(40 * time.Millisecond)
	pt.Skip()
	step(3 * time.Millisecond)
	pt.Mark(StageRecord)
	step(4 * time.Millisecond)
	pt.Mark(StageRecord) // a second lap adds to the first
	want := map[Stage]time.Duration{StageQueue: 7 * time.Millisecond, StageRead: time.Millisecond, StageTranslate: 2 * time.Millisecond, StageRecord: 7 * time.Millisecond}
	for _, s := range reconcileStages {
		got, marked := pt.Took(s)
		if w, ok := want[s]; got != w || marked != ok {
			t.Errorf("%s took %v (marked %t), want %v (%t)", s, got, marked, w, ok)
		}
	}
	// An event after the start is no queue: it did not wait for this reconcile.
	late := startPush(func() time.Time { return clock })
	late.Queued(clock.Add(time.Millisecond))
	if _, marked := late.Took(StageQueue); marked {
		t.Error("an event after the timer's start was taken for a queue")
	}

	type obs struct {
		n   uint64
		sum float64
	}
	before := map[Stage]obs{}
	for _, s := range reconcileStages {
		n, sum := stageObserved(t, s)
		before[s] = obs{n, sum}
	}
	pt.Observe()
	for _, s := range reconcileStages {
		n, sum := stageObserved(t, s)
		var wantN uint64
		if _, ok := want[s]; ok {
			wantN = 1
		}
		if n-before[s].n != wantN {
			t.Errorf("%s observed %d times, want %d", s, n-before[s].n, wantN)
		}
		if got := sum - before[s].sum; wantN == 1 && (got < want[s].Seconds()-1e-9 || got > want[s].Seconds()+1e-9) {
			t.Errorf("%s observed %gs, want %gs", s, got, want[s].Seconds())
		}
	}
}

// The fan-out runs from the publication's start to the last response of
// its version handed to a stream, and is observed once, when every
// connected proxy accepted it; a response of another version is not of it.
func TestFanoutObserved(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker()
	tr.now = func() time.Time { return clock }
	ctx := context.Background()
	eds := resourcev3.EndpointType
	tr.Published("ns/fan", "v1", map[string]string{eds: "e1"})
	for id := int64(1); id <= 2; id++ {
		_ = tr.OnStreamOpen(ctx, id, "")
		_ = tr.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "p", Cluster: "ns/fan"}, TypeUrl: eds, ResourceNames: []string{"c0"}})
	}
	n0, sum0 := stageObserved(t, StageFanout)

	started := clock.Add(time.Second)
	clock = started
	if !tr.publish("ns/fan", "v2", map[string]string{eds: "e2"}, "", nil, "", started) {
		t.Fatal("v2 was not published")
	}
	clock = clock.Add(10 * time.Millisecond)
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: eds, VersionInfo: "e2", Nonce: "1"})
	clock = clock.Add(10 * time.Millisecond)
	tr.OnStreamResponse(ctx, 2, nil, &discoveryv3.DiscoveryResponse{TypeUrl: eds, VersionInfo: "e2", Nonce: "2"})
	clock = clock.Add(10 * time.Millisecond)
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: eds, VersionInfo: "e2", Nonce: "3"})
	last := clock
	clock = clock.Add(10 * time.Millisecond)
	_ = tr.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: eds, VersionInfo: "e2", ResponseNonce: "3", ResourceNames: []string{"c0"}})
	if n, _ := stageObserved(t, StageFanout); n != n0 {
		t.Fatal("the fan-out was observed before every proxy accepted the version")
	}
	clock = clock.Add(10 * time.Millisecond)
	tr.OnStreamResponse(ctx, 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: eds, VersionInfo: "e0", Nonce: "4"}) // not of v2
	clock = clock.Add(time.Second)
	_ = tr.OnStreamRequest(2, &discoveryv3.DiscoveryRequest{TypeUrl: eds, VersionInfo: "e2", ResponseNonce: "2", ResourceNames: []string{"c0"}})
	n, sum := stageObserved(t, StageFanout)
	if n != n0+1 {
		t.Fatalf("the fan-out was observed %d times, want once", n-n0)
	}
	if got, want := sum-sum0, last.Sub(started).Seconds(); got < want-1e-9 || got > want+1e-9 {
		t.Errorf("the fan-out took %gs, want %gs", got, want)
	}
	// Sent again after every proxy accepted it: no second observation.
	tr.OnStreamResponse(ctx, 2, nil, &discoveryv3.DiscoveryResponse{TypeUrl: eds, VersionInfo: "e2", Nonce: "5"})
	_ = tr.OnStreamRequest(2, &discoveryv3.DiscoveryRequest{TypeUrl: eds, VersionInfo: "e2", ResponseNonce: "5", ResourceNames: []string{"c0"}})
	if n, _ := stageObserved(t, StageFanout); n != n0+1 {
		t.Errorf("the fan-out was observed %d times, want once", n-n0)
	}
}
