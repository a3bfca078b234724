package server

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// benchFleet is 50 EDS clusters and their load assignments; c0's endpoint
// listens on port.
func benchFleet(port int) map[string][]types.Resource {
	out := map[string][]types.Resource{}
	for i := range 50 {
		name := fmt.Sprintf("c%d", i)
		p := 8080
		if i == 0 {
			p = port
		}
		out[resourcev3.ClusterType] = append(out[resourcev3.ClusterType], cluster(name, 0))
		out[resourcev3.EndpointType] = append(out[resourcev3.EndpointType], &endpointv3.ClusterLoadAssignment{ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
				Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)}}}}}}}}}}})
	}
	return out
}

// BenchmarkPush measures one publication of a changed endpoint, from
// SetFleet to every proxy's ACK, for 200 and 1000 proxies subscribed by
// name to the 50 load assignments of their fleet, over state of the world
// and delta.
func BenchmarkPush(b *testing.B) {
	for _, n := range []int{200, 1000} {
		for _, mode := range []string{"sotw", "delta"} {
			b.Run(fmt.Sprintf("%s/proxies=%d", mode, n), func(b *testing.B) { benchPush(b, mode, n) })
		}
	}
}

// startBench runs a plaintext server for a benchmark, until it ends.
func startBench(b *testing.B) (context.Context, *Server, string) {
	s := New("127.0.0.1:0", logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	addr, err := s.Addr(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return ctx, s, addr.String()
}

// benchPush is BenchmarkPush for n proxies in mode (sotw or delta).
func benchPush(b *testing.B, mode string, n int) {
	ctx, s, addr := startBench(b)
	if err := s.SetFleet(ctx, fleet, "v0", benchFleet(9000)); err != nil {
		b.Fatal(err)
	}
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	var conns []discoveryv3.AggregatedDiscoveryServiceClient
	for range 20 {
		conns = append(conns, xdstest.Dial(b, addr))
	}
	acked := make(chan string, n*4)
	var wg sync.WaitGroup
	for i := range n {
		c := conns[i%len(conns)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if mode == "sotw" {
				p := xdstest.Connect(b, c, fleet, fmt.Sprintf("p%d", i), resourcev3.EndpointType, names...)
				for {
					resp, err := p.Next("")
					if err != nil {
						return
					}
					acked <- resp.GetVersionInfo()
				}
			}
			d := xdstest.OpenDelta(b, c, fleet, fmt.Sprintf("p%d", i))
			if err := d.Subscribe(resourcev3.EndpointType, names...); err != nil {
				return
			}
			for {
				resp, err := d.Recv()
				if err != nil || d.Ack(resp) != nil {
					return
				}
				acked <- resp.GetSystemVersionInfo()
			}
		}()
	}
	wait := func(v string) {
		for got := 0; got < n; {
			if <-acked == v {
				got++
			}
		}
	}
	wait(s.TypeVersion(fleet, resourcev3.EndpointType))
	cpu := processCPU()
	b.ResetTimer()
	for i := range b.N {
		if err := s.SetFleet(ctx, fleet, fmt.Sprintf("v%d", i+1), benchFleet(9001+i)); err != nil {
			b.Fatal(err)
		}
		wait(s.TypeVersion(fleet, resourcev3.EndpointType))
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// processCPU is the CPU time this process used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
