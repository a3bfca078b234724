package proxy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	downstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var bootstrapCases = []struct {
	name     string
	xds      XDSServer
	overload Overload
}{
	{"seed-sample", XDSServer{ClusterName: "xds_cluster", Host: "xds-service.default", Port: 19000}, Overload{}},
	{"built-in-server", XDSServer{ClusterName: "xds_cluster", Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000}, Overload{}},
	{"ip-address", XDSServer{ClusterName: "my.xds:cluster-1", Host: "10.96.0.10", Port: 1}, Overload{}},
	{"max-port", XDSServer{ClusterName: "x", Host: "a", Port: 65535}, Overload{}},
	{"built-in-server-mtls", XDSServer{ClusterName: "xds_cluster", Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000, MutualTLS: true}, Overload{}},
	{"ip-address-mtls", XDSServer{ClusterName: "xds_cluster", Host: "10.96.0.10", Port: 18000, MutualTLS: true}, Overload{}},
	// A fleet of the built-in server with spec.configRollout: its proxies
	// stream their stats to the server.
	{"built-in-server-mtls-stats-sink", XDSServer{ClusterName: "xds_cluster", Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000, MutualTLS: true, StatsSink: true}, Overload{}},
	{"built-in-server-stats-sink", XDSServer{ClusterName: "xds_cluster", Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000, StatsSink: true}, Overload{}},
	// A container limited to 1 GiB.
	{"heap-limit", XDSServer{ClusterName: "xds_cluster", Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000, MutualTLS: true}, Overload{MaxHeapBytes: MaxHeapBytes(1 << 30)}},
}

func TestRenderBootstrapGolden(t *testing.T) {
	for _, tc := range bootstrapCases {
		t.Run(tc.name, func(t *testing.T) {
			files, err := RenderFiles(tc.xds, tc.overload)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(FileKeys(tc.xds)) {
				t.Errorf("rendered files %d, FileKeys %v", len(files), FileKeys(tc.xds))
			}
			for _, key := range FileKeys(tc.xds) {
				got := files[key]
				// The bootstrap's golden file keeps its name; SDS files add theirs.
				golden := filepath.Join("testdata", "bootstrap-"+tc.name+".yaml")
				if key != BootstrapKey {
					golden = filepath.Join("testdata", "bootstrap-"+tc.name+"."+key)
				}
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./internal/proxy -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s; run go test ./internal/proxy -update and review the diff.\ngot:\n%s", key, golden, got)
				}
			}
			// Rendering is deterministic: an unchanged spec never rewrites the ConfigMap.
			again, _ := RenderFiles(tc.xds, tc.overload)
			for k := range files {
				if !bytes.Equal(files[k], again[k]) {
					t.Errorf("two renders of %s differ", k)
				}
			}
		})
	}
}

// The rendered bootstrap passes Envoy's schema: a strict decode into
// envoy.config.bootstrap.v3.Bootstrap and ValidateAll, and it says what the
// fleet needs.
func TestRenderBootstrapIsValidEnvoyV3(t *testing.T) {
	for _, tc := range bootstrapCases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := RenderBootstrap(tc.xds, tc.overload)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ParseBootstrap(out)
			if err != nil {
				t.Fatalf("rendered bootstrap does not pass Envoy's schema: %v\n%s", err, out)
			}
			if a := b.GetAdmin().GetAddress().GetSocketAddress(); a.GetAddress() != "127.0.0.1" || a.GetPortValue() != AdminPort {
				t.Errorf("admin bound to %s:%d, want 127.0.0.1:%d", a.GetAddress(), a.GetPortValue(), AdminPort)
			}
			ads := b.GetDynamicResources().GetAdsConfig()
			if ads.GetTransportApiVersion().String() != "V3" || len(ads.GetGrpcServices()) != 1 ||
				ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != tc.xds.ClusterName {
				t.Errorf("ads_config = %v", ads)
			}
			if b.GetDynamicResources().GetLdsConfig().GetAds() == nil || b.GetDynamicResources().GetCdsConfig().GetAds() == nil {
				t.Error("LDS and CDS must come from ADS")
			}
			var xds *clusterv3.Cluster
			for _, c := range b.GetStaticResources().GetClusters() {
				if c.GetName() == tc.xds.ClusterName {
					xds = c
				}
			}
			if xds == nil {
				t.Fatalf("no static cluster %q", tc.xds.ClusterName)
			}
			sa := xds.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetAddress() != tc.xds.Host || sa.GetPortValue() != tc.xds.Port {
				t.Errorf("xds cluster reaches %s:%d, want %s", sa.GetAddress(), sa.GetPortValue(), tc.xds)
			}
			opts := &upstreamhttpv3.HttpProtocolOptions{}
			if err := xds.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(opts); err != nil {
				t.Fatalf("xds cluster protocol options: %v", err)
			}
			if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
				t.Error("xds cluster does not use HTTP/2")
			}
			checkTLS(t, tc.xds, xds)
			ls := b.GetStaticResources().GetListeners()
			if len(ls) != 1 || ls[0].GetAddress().GetSocketAddress().GetPortValue() != ReadyPort {
				t.Fatalf("static listeners = %v, want one on %d", ls, ReadyPort)
			}
			checkLimits(t, b, tc.overload)
			checkStatsSink(t, tc.xds, b)
		})
	}
}

// ParseBootstrap is strict: what Envoy would reject, it rejects.
func TestParseBootstrapRejects(t *testing.T) {
	valid, err := RenderBootstrap(bootstrapCases[0].xds, Overload{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "admin:\n  no_such_field: 1\n", "no_such_field"},
		// v2's Cluster.hosts was removed from v3 (load_assignment replaced it).
		{"v2-era field", strings.Replace(string(valid), "typed_extension_protocol_options:", "hosts: []\n    typed_extension_protocol_options:", 1), "hosts"},
		{"port out of range", strings.Replace(string(valid), "port_value: 19000\n    name: xds_cluster", "port_value: 70000\n    name: xds_cluster", 1), "PortValue"},
		{"empty cluster name", strings.Replace(string(valid), "cluster_name: xds_cluster\n    set_node", "cluster_name: \"\"\n    set_node", 1), "ClusterName"},
		{"not yaml", "{", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.yaml == string(valid) {
				t.Fatal("the test's edit did not apply")
			}
			_, err := ParseBootstrap([]byte(tt.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// Any valid spec renders a bootstrap that passes Envoy's schema.
func FuzzRenderBootstrap(f *testing.F) {
	for _, tc := range bootstrapCases {
		f.Add(tc.xds.ClusterName, tc.xds.Host, tc.xds.Port, tc.xds.MutualTLS, tc.xds.StatsSink, int64(tc.overload.MaxHeapBytes))
	}
	f.Fuzz(func(t *testing.T, cluster, host string, port uint32, mtls, stats bool, memoryLimit int64) {
		// The API admits: a cluster name of [A-Za-z0-9_.:-]{1,128}, a DNS name
		// or IP address, a port in 1..65535.
		if !validClusterName(cluster) || !validHost(host) || port < 1 || port > 65535 {
			t.Skip()
		}
		xds := XDSServer{ClusterName: cluster, Host: host, Port: port, MutualTLS: mtls, StatsSink: stats}
		files, err := RenderFiles(xds, Overload{MaxHeapBytes: MaxHeapBytes(memoryLimit)})
		if err != nil {
			t.Fatalf("RenderFiles(%+v, memory limit %d): %v", xds, memoryLimit, err)
		}
		out := files[BootstrapKey]
		if _, err := ParseBootstrap(out); err != nil {
			t.Fatalf("bootstrap for %+v does not pass Envoy's schema: %v\n%s", xds, err, out)
		}
	})
}

func validClusterName(s string) bool {
	if len(s) < 1 || len(s) > 128 || s == AdminClusterName {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.:-", r)) {
			return false
		}
	}
	return true
}

func validHost(s string) bool {
	if len(s) < 1 || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// checkTLS checks the xDS cluster's transport: plaintext without MutualTLS;
// with it, TLS 1.3 to the server's name, and the certificate and CAs from
// SDS files that name the mounted Secret's files and watch their directory.
func checkTLS(t *testing.T, x XDSServer, c *clusterv3.Cluster) {
	t.Helper()
	if !x.MutualTLS {
		if c.GetTransportSocket() != nil {
			t.Errorf("plaintext fleet has a transport socket: %v", c.GetTransportSocket())
		}
		return
	}
	ctx := &tlsv3.UpstreamTlsContext{}
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatalf("xds cluster transport socket: %v", err)
	}
	common := ctx.GetCommonTlsContext()
	if common.GetTlsParams().GetTlsMinimumProtocolVersion() != tlsv3.TlsParameters_TLSv1_3 {
		t.Error("TLS below 1.3 allowed")
	}
	sans := common.GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
	if len(sans) != 1 || sans[0].GetMatcher().GetExact() != x.Host {
		t.Errorf("server name match = %v, want %s", sans, x.Host)
	}
	files, err := RenderFiles(x, Overload{})
	if err != nil {
		t.Fatal(err)
	}
	certs := common.GetTlsCertificateSdsSecretConfigs()
	ca := common.GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
	for _, sds := range []*tlsv3.SdsSecretConfig{certs[0], ca} {
		p := sds.GetSdsConfig().GetPathConfigSource().GetPath()
		key := strings.TrimPrefix(p, BootstrapDir+"/")
		data, ok := files[key]
		if !ok {
			t.Fatalf("SDS path %s is not a file of the bootstrap ConfigMap", p)
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		resp := &discoveryv3.DiscoveryResponse{}
		if err := protojson.Unmarshal(js, resp); err != nil {
			t.Fatalf("%s does not decode strictly as a DiscoveryResponse: %v", key, err)
		}
		secret := &tlsv3.Secret{}
		if len(resp.GetResources()) != 1 || resp.GetResources()[0].UnmarshalTo(secret) != nil || secret.GetName() != sds.GetName() {
			t.Fatalf("%s does not hold secret %s: %v", key, sds.GetName(), resp)
		}
		if err := secret.ValidateAll(); err != nil {
			t.Errorf("%s: %v", key, err)
		}
		var watched string
		var paths []string
		if tc := secret.GetTlsCertificate(); tc != nil {
			watched = tc.GetWatchedDirectory().GetPath()
			paths = []string{tc.GetCertificateChain().GetFilename(), tc.GetPrivateKey().GetFilename()}
		} else {
			watched = secret.GetValidationContext().GetWatchedDirectory().GetPath()
			paths = []string{secret.GetValidationContext().GetTrustedCa().GetFilename()}
		}
		if watched != ClientCertDir {
			t.Errorf("%s watches %q, want the mounted Secret's %s", key, watched, ClientCertDir)
		}
		for _, p := range paths {
			if filepath.Dir(p) != ClientCertDir {
				t.Errorf("%s reads %s, outside %s", key, p, ClientCertDir)
			}
		}
	}
}

// checkStatsSink checks the stats sink: none without StatsSink; with it,
// the metrics service over the xDS cluster, in the form the receiver reads
// (counters as deltas, tags as labels, histograms as buckets), flushed
// every StatsFlushInterval, and no stats matcher, so that every stat stays
// in the admin interface and /stats/prometheus.
func checkStatsSink(t *testing.T, x XDSServer, b *bootstrapv3.Bootstrap) {
	t.Helper()
	if b.GetStatsConfig().GetStatsMatcher() != nil {
		t.Errorf("a stats matcher: %v", b.GetStatsConfig().GetStatsMatcher())
	}
	if !x.StatsSink {
		if len(b.GetStatsSinks()) != 0 || b.GetStatsFlushInterval() != nil {
			t.Errorf("no stats sink asked for, yet sinks %v flushed every %v", b.GetStatsSinks(), b.GetStatsFlushInterval())
		}
		return
	}
	if len(b.GetStatsSinks()) != 1 || b.GetStatsSinks()[0].GetName() != StatsSinkName {
		t.Fatalf("stats sinks %v, want one %s", b.GetStatsSinks(), StatsSinkName)
	}
	c := &metricsv3.MetricsServiceConfig{}
	if err := b.GetStatsSinks()[0].GetTypedConfig().UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	if c.GetGrpcService().GetEnvoyGrpc().GetClusterName() != x.ClusterName || c.GetTransportApiVersion() != corev3.ApiVersion_V3 ||
		!c.GetReportCountersAsDeltas().GetValue() || !c.GetEmitTagsAsLabels() || c.GetHistogramEmitMode() != metricsv3.HistogramEmitMode_HISTOGRAM {
		t.Errorf("stats sink %v", c)
	}
	if got := b.GetStatsFlushInterval().AsDuration(); got != StatsFlushInterval {
		t.Errorf("stats flushed every %v, want %v", got, StatsFlushInterval)
	}
}

// checkLimits checks the edge proxy's limits: 32 KiB buffers on the
// bootstrap's listener and local cluster (the xDS server's connection keeps
// Envoy's default), a connection limit, and, with a heap limit, the heap
// monitor and the actions it triggers.
func checkLimits(t *testing.T, b *bootstrapv3.Bootstrap, o Overload) {
	t.Helper()
	ready := b.GetStaticResources().GetListeners()[0]
	if ready.GetPerConnectionBufferLimitBytes().GetValue() != BufferLimitBytes || !ready.GetIgnoreGlobalConnLimit() {
		t.Errorf("ready listener: buffer limit %v, ignores the connection limit %v", ready.GetPerConnectionBufferLimitBytes(), ready.GetIgnoreGlobalConnLimit())
	}
	for _, c := range b.GetStaticResources().GetClusters() {
		want := uint32(BufferLimitBytes)
		if c.GetName() != AdminClusterName {
			want = 0 // the xDS cluster
		}
		if got := c.GetPerConnectionBufferLimitBytes().GetValue(); got != want {
			t.Errorf("cluster %s: buffer limit %d, want %d", c.GetName(), got, want)
		}
	}
	om := b.GetOverloadManager()
	monitors := map[string]*anypb.Any{}
	for _, m := range om.GetResourceMonitors() {
		monitors[m.GetName()] = m.GetTypedConfig()
	}
	conns := &downstreamv3.DownstreamConnectionsConfig{}
	if err := monitors[connectionsMonitor].UnmarshalTo(conns); err != nil || conns.GetMaxActiveDownstreamConnections() != MaxDownstreamConnections {
		t.Errorf("connection limit: %v %v", conns, err)
	}
	heap := &fixedheapv3.FixedHeapConfig{}
	if o.MaxHeapBytes == 0 {
		if _, ok := monitors[fixedHeapMonitor]; ok || len(om.GetActions()) != 0 {
			t.Errorf("no heap limit, yet monitors %v and actions %v", om.GetResourceMonitors(), om.GetActions())
		}
		return
	}
	if err := monitors[fixedHeapMonitor].UnmarshalTo(heap); err != nil || heap.GetMaxHeapSizeBytes() != o.MaxHeapBytes {
		t.Errorf("heap monitor: %v %v, want %d bytes", heap, err, o.MaxHeapBytes)
	}
	actions := map[string]float64{}
	for _, a := range om.GetActions() {
		if len(a.GetTriggers()) != 1 || a.GetTriggers()[0].GetName() != fixedHeapMonitor {
			t.Errorf("action %s triggers %v", a.GetName(), a.GetTriggers())
		}
		actions[a.GetName()] = a.GetTriggers()[0].GetThreshold().GetValue()
	}
	if actions[shrinkHeapAction] != ShrinkHeapAt || actions[stopAcceptingRequests] != StopRequestsAt || len(actions) != 2 {
		t.Errorf("overload actions = %v", actions)
	}
}

// The heap limit leaves a fifth of the container's memory limit, and at
// least 64 MiB, to what is not heap, and is left out where too little would
// remain.
func TestMaxHeapBytes(t *testing.T) {
	const mi = 1 << 20
	for _, tt := range []struct {
		limit int64
		want  uint64
	}{
		{0, 0},
		{-1, 0},
		{64 * mi, 0},
		{95 * mi, 0},
		{96 * mi, 32 * mi},
		{128 * mi, 64 * mi},
		{256 * mi, 192 * mi},
		{320 * mi, 256 * mi},
		{1 << 30, 1<<30 - (1<<30)/5},
		{4 << 30, 4<<30 - (4<<30)/5},
	} {
		if got := MaxHeapBytes(tt.limit); got != tt.want {
			t.Errorf("MaxHeapBytes(%d MiB) = %d MiB, want %d MiB", tt.limit/mi, got/mi, tt.want/mi)
		}
	}
}
