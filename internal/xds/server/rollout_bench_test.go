package server

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// BenchmarkRolloutStep measures a rollout across 1000 proxies subscribed
// to the 50 clusters of their fleet over state of the world: each
// iteration rolls a changed cluster out to the first 10 % of the proxies
// (from SetFleetRollout to their ACKs: step-ms), then to every proxy
// (complete-ms). It also reports what serving two revisions costs: the
// bytes allocated to hold the previous revision beside the new one
// (previous-KiB), which every stream shares; a stream adds only its node id.
func BenchmarkRolloutStep(b *testing.B) {
	const n = 1000
	ctx, s, addr := startBench(b)
	fleetOf := func(i int) map[string][]types.Resource {
		f := benchFleet(9000)
		f[resourcev3.ClusterType][0] = cluster("c0", i) // a changed cluster
		return f
	}
	if err := s.SetFleet(ctx, fleet, "r0", fleetOf(0)); err != nil {
		b.Fatal(err)
	}
	var conns []discoveryv3.AggregatedDiscoveryServiceClient
	for range 20 {
		conns = append(conns, xdstest.Dial(b, addr))
	}
	type ack struct{ node, version string }
	acked := make(chan ack, n*4)
	nodes := make([]string, n)
	for i := range n {
		nodes[i] = fmt.Sprintf("p%d", i)
		go func() {
			p := xdstest.Connect(b, conns[i%len(conns)], fleet, nodes[i], resourcev3.ClusterType)
			for {
				resp, err := p.Next("")
				if err != nil {
					return
				}
				acked <- ack{nodes[i], resp.GetVersionInfo()}
			}
		}()
	}
	wait := func(version string, count int) {
		for got := 0; got < count; {
			if a := <-acked; a.version == version {
				got++
			}
		}
	}
	wait(s.TypeVersion(fleet, resourcev3.ClusterType), n)

	policy := &publish.RolloutPolicy{Steps: []publish.RolloutStep{{Percent: 10}}}
	state := publish.Rollout{Revision: "r0", Phase: publish.RolloutComplete}
	answers := make(map[string]publish.ProxyAnswer, n)
	var step, complete time.Duration
	var previous int64
	b.ResetTimer()
	for i := range b.N {
		prev, next := fmt.Sprintf("r%d", i), fmt.Sprintf("r%d", i+1)
		for _, node := range nodes {
			answers[node] = publish.ProxyAnswer{Acked: prev}
		}
		d := publish.StepRollout(publish.RolloutInput{Policy: policy, State: state, Target: next, Proxies: answers, Now: time.Now()})
		lead := len(publish.SelectProxies(policy.Steps, 0, nodes))
		start := time.Now()
		if err := s.SetFleetRollout(ctx, fleet, next, fleetOf(i+1), &Staged{Rollout: d.Rollout, Version: prev, Resources: fleetOf(i)}); err != nil {
			b.Fatal(err)
		}
		at := s.TypeVersion(fleet, resourcev3.ClusterType)
		wait(at, lead)
		step += time.Since(start)
		if i == 0 {
			b.StopTimer()
			previous = allocated(func() {
				if _, _, err := encodeFleet(prev, fleetOf(i)); err != nil {
					b.Fatal(err)
				}
			})
			start = time.Now()
			if err := s.SetFleet(ctx, fleet, next, fleetOf(i+1)); err != nil {
				b.Fatal(err)
			}
			wait(at, n-lead)
			complete += time.Since(start)
			b.StartTimer()
		} else {
			start = time.Now()
			if err := s.SetFleet(ctx, fleet, next, fleetOf(i+1)); err != nil {
				b.Fatal(err)
			}
			wait(at, n-lead)
			complete += time.Since(start)
		}
		state = publish.Rollout{Revision: next, Phase: publish.RolloutComplete}
	}
	b.StopTimer()
	b.ReportMetric(float64(step.Microseconds())/1000/float64(b.N), "step-ms")
	b.ReportMetric(float64(complete.Microseconds())/1000/float64(b.N), "complete-ms")
	b.ReportMetric(float64(previous)/1024, "previous-KiB")
}

// allocated is the bytes that f allocates, on a quiet heap: the
// benchmark's proxies wait for a publication meanwhile.
func allocated(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}
