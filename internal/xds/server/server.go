// Package server is the runtime stage of the control plane, the last one
// before the debug endpoint: each replica's ADS server. It takes what
// publish decided for a fleet (SetFleet: a version and its resources) and
// serves it to the fleet's proxies over state-of-the-world and delta ADS on
// one port, under mutual TLS with per-fleet identity (identity.go) and
// bounded by Limits, beside the services added to that port (AddService:
// the stats receiver); it tracks what each proxy accepted (Tracker), exports
// it as metrics and health checks, and writes it to the replica's report
// (Reporter) for the leader to add up, with, while a fleet rolls out, each
// proxy's stats window from the stats receiver (SetStats).
//
// Its invariant: a proxy is served only its own fleet's configuration, as
// published, and nothing else. It serves five types (resource.Kinds); a
// proxy's subscription to any other is left unanswered, and its stream and
// other subscriptions go on (unserved.go). What serves gRPC, links
// go-control-plane's server or registers metrics lives here (or in the
// debug endpoint after it, or in the stats receiver served on this port),
// so that the stages before it (resource,
// translate, publish) stay pure; package xds tests that they do.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	sotwv3 "github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/go-logr/logr"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/cache"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Server is the operator's ADS server. It serves every fleet's published
// configuration to its proxies, over state-of-the-world and delta ADS on
// one port. Every replica of the operator runs one: it needs no leader.
type Server struct {
	addr    string
	cache   *cache.Cache
	tracker *Tracker
	log     logr.Logger
	// ready is closed once the server listens; bound is then set.
	ready chan struct{}
	bound net.Addr

	// A fleet's publication (SetFleet, ClearFleet) changes two records:
	// the fleet's, in the tracker (fleetRecord: its version, type versions,
	// previous revision and rollout, and its proxies' counts), which a
	// report reads in one look, and then the cache's. It holds the fleet's
	// publication lock (publishing) throughout, so that two publications of
	// one fleet never interleave; publications of other fleets go on
	// meanwhile, but for those that share the lock's stripe. The tracker
	// learns a publication before any proxy can answer it: a proxy may
	// answer as soon as the cache has it.
	//
	// Lock order: a fleet's publication lock first; under it the server
	// takes the fleet's lock in the tracker and then the fleet's in the
	// cache, one at a time. No one holds two publication locks at once, and
	// the tracker and the cache never call the server, so nothing that
	// holds one of their locks waits for a publication lock.
	publishing [publicationStripes]sync.Mutex

	limits Limits
	// now is the clock of the per-source limits; gate is the listener, once
	// the server listens.
	now  func() time.Time
	gate *connGate
	// tls, when set, gives each connection its TLS configuration, and
	// trustDomain is that of the fleets' client certificates. Without it
	// the server speaks plaintext.
	tls         func(context.Context) (*tls.Config, error)
	trustDomain string
	// stuckAfter, serveEnded and probe serve Healthy.
	stuckAfter time.Duration
	serveEnded atomic.Bool
	probe      cacheProbe
	// services are served beside ADS (AddService).
	services []Service
	// stats, when set, gives the windows of the rolling fleets' proxies
	// (SetStats).
	stats ProxyStats
}

// ProxyStats is the stats receiver (internal/xds/stats), as the server
// reads it to report its proxies' windows while their fleet rolls out.
type ProxyStats interface {
	// Windows returns the windows of the proxies versions names, by fleet
	// and node id: versions gives, of each fleet that rolls out, the
	// version each of its proxies on this replica accepted last ("" for
	// none). A proxy whose stats do not come to this replica gets none.
	// What it keeps of any other fleet or proxy it drops.
	Windows(versions map[string]map[string]string) map[string]map[string]*publish.Window
	// WindowsChanged is signalled when a flush is due to change a
	// rolling fleet's windows (at most once a flush interval a fleet).
	WindowsChanged() <-chan struct{}
}

// SetStats has the server report its proxies' windows from ps (the
// stats receiver served beside ADS, AddService). Call it before Start.
func (s *Server) SetStats(ps ProxyStats) { s.stats = ps }

// Service is a gRPC service served on the xDS server's port beside ADS,
// to the same clients over the same connections and credentials: the
// stats receiver (internal/xds/stats), to which a fleet's proxies stream
// their figures over the mutual TLS connection of their ADS stream. It
// checks who is on each of its streams itself, with pki.PeerFleet and the
// server's trust domain, as the server does for ADS.
type Service interface {
	// Register registers the service on the server's gRPC server.
	Register(*grpc.Server)
}

// AddService serves svc on the server's port beside ADS. Call it before
// Start.
func (s *Server) AddService(svc Service) { s.services = append(s.services, svc) }

// publicationStripes is the number of publication locks: fleets share them
// by a hash of their name.
const publicationStripes = 64

// publicationLock returns fleet's publication lock.
func (s *Server) publicationLock(fleet string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(fleet))
	return &s.publishing[h.Sum32()%publicationStripes]
}

// New returns a server for addr (host:port; port 0 picks one).
func New(addr string, log logr.Logger) *Server {
	return &Server{
		addr:    addr,
		cache:   cache.New(DefaultLimits.names(), countRefused),
		tracker: NewTracker(),
		log:     log,
		ready:   make(chan struct{}),

		limits:     DefaultLimits,
		now:        time.Now,
		stuckAfter: DefaultStuckAfter,
	}
}

// SetTLS has the server speak mutual TLS only: config gives the TLS
// configuration of each new connection (the server's certificate then,
// and the CAs a client certificate must chain to), and a stream's fleet is
// the one its client certificate names in trustDomain. Call it before Start.
func (s *Server) SetTLS(config func(context.Context) (*tls.Config, error), trustDomain string) {
	s.tls, s.trustDomain = config, trustDomain
}

// Tracker returns the server's record of its proxies.
func (s *Server) Tracker() *Tracker { return s.tracker }

// maxNodeID bounds a rejecting proxy's node id in a report: it is the
// proxy's own claim, and a pod's name is never longer.
const maxNodeID = 253

// ProxyReport is what the server's proxies answered, by fleet: a Reporter's
// Proxies. Each fleet's version and counts are of one publication. While a
// fleet rolls out, each of its proxies' answers carries the proxy's window
// since the version it accepted, when its stats come to this replica
// (ProxyStats): they do, over the connection of its ADS stream
// (proxy.StatsSink).
func (s *Server) ProxyReport() report.Report {
	out := report.Report{}
	var versions map[string]map[string]string
	for _, id := range s.tracker.Fleets() {
		version, c, answers := s.tracker.report(id)
		f := report.FleetProxies{Version: version, Connected: c.Connected, Acked: c.Acked, Nacked: c.Nacked, LastNACK: publish.Truncate(c.LastNACK),
			LastNACKType: c.LastNACKType, LastNACKNode: conditions.Truncate(c.LastNACKNode, maxNodeID), Proxies: reportable(answers)}
		out[id] = f
		if s.stats != nil && len(f.Proxies) > 0 {
			v := make(map[string]string, len(f.Proxies))
			for node, a := range f.Proxies {
				v[node] = a.Acked
			}
			if versions == nil {
				versions = map[string]map[string]string{}
			}
			versions[id] = v
		}
	}
	if s.stats != nil {
		// Called with every report, so that the marks of a fleet that no
		// longer rolls out, or of a proxy that left, are dropped.
		for id, windows := range s.stats.Windows(versions) {
			proxies := out[id].Proxies
			for node, w := range windows {
				if a, ok := proxies[node]; ok {
					a.Window = w
					proxies[node] = a
				}
			}
		}
	}
	return out
}

// reportable cuts what proxies claim (their node ids) and what they say
// (a rejection's detail) to what a report keeps; a node id cut to the
// bound stands for no pod, whose names are never longer.
func reportable(answers map[string]publish.ProxyAnswer) map[string]publish.ProxyAnswer {
	if len(answers) == 0 {
		return nil
	}
	out := make(map[string]publish.ProxyAnswer, len(answers))
	for node, a := range answers {
		if len(node) > maxNodeID {
			continue
		}
		a.Detail = publish.Truncate(a.Detail)
		out[node] = a
	}
	return out
}

// ProxiesChanged is signalled when ProxyReport may have changed (see
// Tracker.Changed).
func (s *Server) ProxiesChanged() <-chan struct{} { return s.tracker.Changed() }

// Addr waits until the server listens and returns its address.
func (s *Server) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-s.ready:
		return s.bound, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SetFleet publishes a fleet's configuration as version. Each type of
// resource is versioned on its own, by a hash of its content: a type whose
// content is unchanged keeps its version, so that its subscribers are not
// sent it again (an endpoint change pushes only EDS), and every replica
// gives the same content the same version. Publishing what is already
// published does nothing. The fleet's record and the cache change in one
// step, under the fleet's publication lock.
func (s *Server) SetFleet(ctx context.Context, fleet, version string, resources map[string][]types.Resource) error {
	return s.SetFleetRollout(ctx, fleet, version, resources, nil)
}

// Staged is the previous revision: what a fleet serves, while a revision
// rolls out, to the proxies that the rollout's step does not lead. (Its
// name is older than the glossary's word, previous; it is the only place
// the word staged means that.)
type Staged struct {
	// Rollout is the recorded rollout: Rollout.Serves says, by node id,
	// which proxies are served Previous.
	Rollout publish.Rollout
	// Version and Resources are the previous revision's.
	Version   string
	Resources map[string][]types.Resource
}

// SetFleetRollout publishes a fleet's configuration as version, as
// SetFleet does, and, with previous set while a revision rolls out, the
// previous revision to the proxies that the rollout's step does not lead.
// Each stream is served by its proxy's node id; the tracker learns the
// previous revision's type versions, so that its proxies' answers count.
func (s *Server) SetFleetRollout(_ context.Context, fleet, version string, resources map[string][]types.Resource, previous *Staged) error {
	started := s.tracker.now() // of the fan-out (StageFanout)
	// p is what the streams are served: each resource marshalled once, here
	// (encoded.go). check holds the same resources as they are, for the
	// consistency check, which looks into Envoy's own types.
	p, typeVersions, err := encodeFleet(version, resources)
	if err != nil {
		return fmt.Errorf("xds: fleet %s: %w", fleet, err)
	}
	var prev *cache.Previous
	var prevTypes map[string]string
	if previous != nil && previous.Rollout.Phase != publish.RolloutComplete && previous.Version != version {
		snap, types, err := encodeFleet(previous.Version, previous.Resources)
		if err != nil {
			return fmt.Errorf("xds: fleet %s, version %s: %w", fleet, previous.Version, err)
		}
		prev, prevTypes = &cache.Previous{Snapshot: snap, Rollout: previous.Rollout}, types
	}
	if !s.publish(fleet, p, typeVersions, prev, prevTypes, started) {
		return nil
	}
	if debug := s.log.V(1); debug.Enabled() {
		// EDS and RDS names must match what clusters and listeners ask for;
		// a missing ClusterLoadAssignment is allowed (the cluster has no
		// endpoints yet). Only a new publication, and only for the debug
		// log, is checked.
		check := &cachev3.Snapshot{}
		for _, k := range resource.Kinds {
			check.Resources[cachev3.GetResponseType(k.TypeURL)] = cachev3.NewResources(p.TypeVersion(k.TypeURL), resources[k.TypeURL])
		}
		if err := check.Consistent(); err != nil {
			debug.Info("snapshot is not consistent", "fleet", fleet, "reason", err.Error())
		}
	}
	return nil
}

// encodeFleet encodes a publication of resources as version, and returns
// it with each type's version.
func encodeFleet(version string, resources map[string][]types.Resource) (*cache.Snapshot, map[string]string, error) {
	p, err := cache.NewSnapshot(version, resources)
	if err != nil {
		return nil, nil, err
	}
	typeVersions := map[string]string{}
	for _, k := range resource.Kinds {
		typeVersions[k.TypeURL] = p.TypeVersion(k.TypeURL)
	}
	return p, typeVersions, nil
}

// publish makes p, of typeVersions, the fleet's publication, with previous
// (of previousTypes), when set, served to the proxies its rollout does not
// lead, unless the fleet's record holds that already, and reports whether
// it did; started is when the publication started.
func (s *Server) publish(fleet string, p *cache.Snapshot, typeVersions map[string]string, previous *cache.Previous, previousTypes map[string]string, started time.Time) bool {
	pub := s.publicationLock(fleet)
	pub.Lock()
	defer pub.Unlock()
	var previousVersion, rollout string
	if previous != nil {
		previousVersion, rollout = previous.Snapshot.Version(), previous.Rollout.Key()
	}
	if !s.tracker.publish(fleet, p.Version(), typeVersions, previousVersion, previousTypes, rollout, started) {
		return false
	}
	s.cache.Publish(fleet, p, previous)
	return true
}

// TypeVersion returns the version a type's resources are served at to fleet, or "".
func (s *Server) TypeVersion(fleet, typeURL string) string {
	p := s.cache.Published(fleet)
	if p == nil {
		return ""
	}
	return p.TypeVersion(typeURL)
}

// Version returns the version of the fleet's published configuration, or "".
func (s *Server) Version(fleet string) string { return s.tracker.Version(fleet) }

// Resources returns the fleet's published resources by type URL.
func (s *Server) Resources(fleet string) map[string][]types.Resource {
	p := s.cache.Published(fleet)
	if p == nil {
		return nil
	}
	return p.Resources()
}

// ClearFleet stops serving a fleet: its proxies keep what they have until
// a new configuration is published.
func (s *Server) ClearFleet(fleet string) {
	pub := s.publicationLock(fleet)
	pub.Lock()
	defer pub.Unlock()
	s.tracker.Forget(fleet)
	s.cache.Clear(fleet)
}

// Listening is a readiness check: it fails until the server accepts connections.
func (s *Server) Listening(*http.Request) error {
	select {
	case <-s.ready:
		return nil
	default:
		return errors.New("the xDS server is not listening yet")
	}
}

// xdsReadBuffer is the read buffer of each xDS connection over TLS: an ACK,
// or a state-of-the-world request naming a few dozen resources, fits in
// it, and a larger request is read past it, straight into its message.
// crypto/tls below holds what it read from the socket and decrypted a
// record at a time, so that the buffer saves calls, not reads: at 10,000
// proxies each KiB of it is 10 MiB of heap.
const xdsReadBuffer = 2 << 10

// NeedLeaderElection is false: every replica serves xDS.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then stops gracefully: streams get a few
// seconds to finish before they are closed.
func (s *Server) Start(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("xds: listening on %s: %w", s.addr, err)
	}
	s.bound = lis.Addr()
	s.gate = newConnGate(lis, s.limits, s.now)
	lis = s.gate
	close(s.ready)
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(s.limits.MaxStreamsPerConnection)),
		grpc.ConnectionTimeout(s.limits.HandshakeTimeout),
		grpc.MaxRecvMsgSize(s.limits.MaxRequestBytes),
		// Find dead proxies and let them find a dead server; allow their keepalives.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	creds := insecure.NewCredentials()
	if s.tls != nil {
		// Each proxy holds a connection of its own, which gRPC reads
		// through a buffer of its own, 32 KiB by default: 320 MiB at
		// 10,000 proxies, 44% of the live heap. crypto/tls below already
		// reads and decrypts a whole record at a time; the buffer only
		// saves calls into it, and a proxy's requests are small.
		// (gRPC's write buffer is shared already: a connection holds one
		// from a pool only while it writes.)
		opts = append(opts, grpc.ReadBufferSize(xdsReadBuffer))
		// A handshake without a client certificate that chains to the CA
		// fails: such a client never gets a response.
		creds = credentials.NewTLS(&tls.Config{
			MinVersion: tls.VersionTLS13,
			GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				return s.tls(hello.Context())
			},
		})
	}
	// A connection counts against MaxConnections once its handshake is done.
	opts = append(opts, grpc.Creds(gatedCreds{creds}))
	g := grpc.NewServer(opts...)
	callbacks := guard{Tracker: s.tracker, trustDomain: s.trustDomain, names: s.limits.names(), log: s.log}
	// Ordered: a state-of-the-world stream's responses go out in the order
	// the cache answers them (delta streams always do).
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(ctx, s.cache, callbacks, sotwv3.WithOrderedADS()))
	for _, svc := range s.services {
		svc.Register(g)
	}
	if s.tls != nil {
		s.log.Info("serving xDS over mutual TLS", "address", s.bound.String(), "trustDomain", s.trustDomain)
	} else {
		s.log.Info("serving xDS in PLAINTEXT: any client that reaches the port can read any fleet's configuration; use it only for local experiments", "address", s.bound.String())
	}

	if s.stats != nil {
		// A flush that changes a rolling fleet's windows changes the report.
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.stats.WindowsChanged():
					s.tracker.signal()
				}
			}
		}()
	}

	done := make(chan error, 1)
	go func() {
		err := g.Serve(lis)
		s.serveEnded.Store(true)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		g.Stop()
	}
	if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
