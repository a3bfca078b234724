package proxy

import (
	"time"

	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	downstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A proxy's limits, as Envoy's "Configuring Envoy as an edge proxy" best
// practices give them: a proxy on the pod network faces peers it does not
// control, and one that runs out of memory is killed with every connection
// it holds.
const (
	// BufferLimitBytes bounds what the bootstrap's own listener and local
	// cluster buffer per connection (Envoy's default is 1 MiB).
	BufferLimitBytes = 32 << 10
	// MaxDownstreamConnections is the most connections a proxy accepts, over
	// all its listeners; one more is refused until another closes.
	MaxDownstreamConnections = 50000
	// ShrinkHeapAt and StopRequestsAt are the shares of MaxHeapBytes at
	// which the proxy returns free memory to the system, and then answers
	// new requests with 503 until its heap shrinks.
	ShrinkHeapAt   = 0.90
	StopRequestsAt = 0.95
	// heapReserveMin and heapReserveShare are what MaxHeapBytes leaves of
	// the memory limit for what is not heap: the binary, thread stacks, and
	// the socket buffers that cgroup v2 charges to the container.
	heapReserveMin   = 64 << 20
	heapReserveShare = 5 // a fifth
	// minHeap is the smallest heap worth monitoring.
	minHeap = 32 << 20
)

// Names of Envoy's resource monitors and overload actions.
const (
	fixedHeapMonitor      = "envoy.resource_monitors.fixed_heap"
	connectionsMonitor    = "envoy.resource_monitors.global_downstream_max_connections"
	shrinkHeapAction      = "envoy.overload_actions.shrink_heap"
	stopAcceptingRequests = "envoy.overload_actions.stop_accepting_requests"
)

// Overload is what a proxy's overload manager protects.
type Overload struct {
	// MaxHeapBytes is the heap that the proxy's overload actions are
	// measured against (MaxHeapBytes); 0 leaves the heap unmonitored.
	MaxHeapBytes uint64
}

// MaxHeapBytes is the heap a proxy whose container may use memoryLimit
// bytes may fill: the limit less a fifth of it, and at least 64 MiB, for
// what is not heap. It is 0, no heap limit, without a memory limit or when
// less than 32 MiB would be left.
func MaxHeapBytes(memoryLimit int64) uint64 {
	reserve := max(memoryLimit/heapReserveShare, heapReserveMin)
	if memoryLimit-reserve < minHeap {
		return 0
	}
	return uint64(memoryLimit - reserve)
}

// overloadManager caps the proxy's downstream connections and, with a heap
// limit, sheds load before the heap reaches it.
func overloadManager(o Overload) *overloadv3.OverloadManager {
	m := &overloadv3.OverloadManager{
		RefreshInterval: durationpb.New(250 * time.Millisecond),
		ResourceMonitors: []*overloadv3.ResourceMonitor{{
			Name: connectionsMonitor,
			ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: mustAny(&downstreamv3.DownstreamConnectionsConfig{
				MaxActiveDownstreamConnections: MaxDownstreamConnections,
			})},
		}},
	}
	if o.MaxHeapBytes == 0 {
		return m
	}
	m.ResourceMonitors = append(m.ResourceMonitors, &overloadv3.ResourceMonitor{
		Name: fixedHeapMonitor,
		ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: mustAny(&fixedheapv3.FixedHeapConfig{
			MaxHeapSizeBytes: o.MaxHeapBytes,
		})},
	})
	atHeap := func(action string, share float64) *overloadv3.OverloadAction {
		return &overloadv3.OverloadAction{Name: action, Triggers: []*overloadv3.Trigger{{
			Name:         fixedHeapMonitor,
			TriggerOneof: &overloadv3.Trigger_Threshold{Threshold: &overloadv3.ThresholdTrigger{Value: share}},
		}}}
	}
	m.Actions = []*overloadv3.OverloadAction{atHeap(shrinkHeapAction, ShrinkHeapAt), atHeap(stopAcceptingRequests, StopRequestsAt)}
	return m
}
