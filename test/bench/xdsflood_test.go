//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/standin"
)

// TestXDSNameFlood measures what a client with a fleet's certificate costs
// the operator when it subscribes to millions of names, and whether it
// delays another fleet's pushes. BENCH_FLOOD_STREAMS attacking streams
// (default 2) of fleet A run at once, each in turn one of:
//   - delta, BENCH_FLOOD_REQUESTS requests (default 60) of BENCH_FLOOD_NAMES
//     new names each (default 40,000): 2.4 million names;
//   - delta, requests of 9,000 new names each, under the limit of one
//     request, until the names add up past it;
//   - state of the world, one request of 500,000 names, larger than a
//     request may be.
//
// The server must end every one of them with ResourceExhausted. Fleet B's
// push to ACK (BENCH_FLOOD_B_PROXIES proxies, default 100, state of the
// world) is measured BENCH_XDS_ROUNDS times before the attack and as many
// times during it; the operator's heap in use is sampled every 200 ms
// during it, and its live heap (after a GC) taken before and after.
func TestXDSNameFlood(t *testing.T) {
	addr := xdsAddr(t)
	streams := sizeEnv(t, "BENCH_FLOOD_STREAMS", 2)
	requests := sizeEnv(t, "BENCH_FLOOD_REQUESTS", 60)
	perRequest := sizeEnv(t, "BENCH_FLOOD_NAMES", 40000)
	proxiesB := sizeEnv(t, "BENCH_FLOOD_B_PROXIES", 100)
	rounds := sizeEnv(t, "BENCH_XDS_ROUNDS", 10)
	ctx := context.Background()
	ns := "bench-xds-flood"
	namespace(t, ns)
	certA, certB := twoFleets(t, ns)
	cfgA := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "a", Resources: clusterRange(0, 1, 8080, 8080)}}
	cfgB := &examplev1.EnvoyConfig{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns},
		Spec: examplev1.EnvoyConfigSpec{EnvoyRef: "b", Resources: xdsResources(9000)}}
	for _, cfg := range []*examplev1.EnvoyConfig{cfgA, cfgB} {
		if err := k8s.Create(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	acksB := startLoadClients(t, addr, ns+"/b", "sotw", proxiesB, xdsClusters, certB)
	acksB.waitAll(t, proxiesB, "")
	port := 9001
	quiet := pushRounds(t, cfgB, acksB, proxiesB, rounds, &port)
	before, cpu, selfCPU := operatorHeap(t), operatorCPU(t), ownCPU()

	// The attack, until B's rounds are done.
	creds, err := standin.CredentialsFromDir(certA, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	actx, stop := context.WithCancel(ctx)
	var refused, other atomic.Int64
	var lastOther atomic.Value
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; actx.Err() == nil; k++ {
				err := flood(actx, c, &corev3.Node{Id: fmt.Sprintf("attacker-%d-%d", i, k), Cluster: ns + "/a"}, k%3, requests, perRequest)
				switch {
				case actx.Err() != nil:
				case status.Code(err) == codes.ResourceExhausted:
					refused.Add(1)
				default:
					other.Add(1)
					lastOther.Store(fmt.Sprint(err))
				}
			}
		}()
	}
	var peak int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for actx.Err() == nil {
			if s, err := operatorMetric(t, "go_memstats_heap_inuse_bytes", nil); err == nil && int64(s.Value) > peak {
				peak = int64(s.Value)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	busy := pushRounds(t, cfgB, acksB, proxiesB, rounds, &port)
	// The attack goes on until some of its streams were refused: an attack
	// that never reached the server would measure nothing.
	defer stop() // the attack ends with the test, should the wait fail it
	testenv.Poll(t, 100*time.Millisecond, 2*time.Minute, fmt.Sprintf("%d attacking streams to be refused", streams), func() (bool, error) {
		return refused.Load() >= int64(streams) || other.Load() > 0, fmt.Errorf("%d refused", refused.Load())
	})
	stop()
	wg.Wait()
	<-sampled
	attackCPU, clientCPU := operatorCPU(t)-cpu, (ownCPU() - selfCPU).Seconds()
	if n := other.Load(); n > 0 {
		t.Fatalf("%d attacking streams ended otherwise than with ResourceExhausted, the last with %v", n, lastOther.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("no attacking stream was refused: the attack did not reach the server")
	}
	after := operatorHeap(t)
	if grown := after.HeapAlloc - before.HeapAlloc; grown > 64<<20 {
		t.Errorf("the operator's live heap grew by %.0f MiB over the attack: it keeps what refused streams sent", mib(grown))
	}
	p := func(l []time.Duration, q int) time.Duration { return l[len(l)*q/100] }
	row := fmt.Sprintf("| %d streams at once, %d refused | %d proxies | %s | %s | %s | %s | %.1f s, %.0f ms per refused stream | %.1f s | %.0f / %.0f / %.0f |",
		streams, refused.Load(), proxiesB, ms(p(quiet, 50)), ms(p(quiet, 99)), ms(p(busy, 50)), ms(p(busy, 99)),
		attackCPU, attackCPU*1000/float64(refused.Load()), clientCPU, mib(before.HeapAlloc), mib(peak), mib(after.HeapAlloc))
	Record(t, "xds-flood", strings.Join([]string{
		"| fleet A's attack | fleet B | B push to ACK p50, quiet | p99, quiet | B p50, under attack | p99, under attack | operator CPU during the attack (B's pushes included) | the attacking client's CPU | operator heap (MiB): live before / in use at most during / live after |",
		"|---|---|---|---|---|---|---|---|---|",
		row,
	}, "\n")+"\n")
}

// ownCPU is the CPU time this process (the benchmark, and its attacking
// client) has used, user and system.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// flood plays one attacking stream of kind k (see TestXDSNameFlood) and
// returns how it ended.
func flood(ctx context.Context, c discoveryv3.AggregatedDiscoveryServiceClient, node *corev3.Node, k, requests, perRequest int) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return out
	}
	if k == 2 {
		st, err := c.StreamAggregatedResources(sctx)
		if err != nil {
			return err
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resourcev3.EndpointType, ResourceNames: names("n", 500000)}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err = st.Recv()
		return err
	}
	st, err := c.DeltaAggregatedResources(sctx)
	if err != nil {
		return err
	}
	n, size := requests, perRequest
	if k == 1 {
		n, size = 1000, 9000
	}
	for r := range n {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: names(fmt.Sprintf("r%d", r), size)}
		if r == 0 {
			req.Node = node
		}
		if err := st.Send(req); err != nil {
			break // the server ended the stream: Recv says how
		}
	}
	for {
		if _, err := st.Recv(); err != nil {
			return err
		}
	}
}
