package translate

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Bounds: the fields that size the proxy's memory, CPU or connections (the
// bound class of fields.txt) take values between a floor and a ceiling, so
// that one EnvoyConfig cannot starve the proxy that serves the others'; and
// a fleet holds at most so many resources of each kind, fewer than the xDS
// server takes on one stream (server.Limits.MaxNamesPerType), so that what
// admission admits never makes the server refuse a proxy.

// BoundsFlag is the operator's flag that changes the bounds; refusals name
// it.
const BoundsFlag = "--envoyconfig-bounds"

// Bound is a floor and a ceiling, both included. A duration's are in
// nanoseconds, a bool's 0 (false) and 1 (true).
type Bound struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

// Bounds are the bounds that differ from defaultBounds, by field (its full
// name) or by fleetCount; the zero value is the defaults.
type Bounds map[string]Bound

// fleetPrefix names the bound of a fleet's count of one kind of resource:
// "fleet.<field of spec.resources>", e.g. fleet.clusters.
const fleetPrefix = "fleet."

// Ranges of the defaults, in the units of Bound.
const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
	hr  = int64(time.Hour)
	kib = int64(1 << 10)
	mib = int64(1 << 20)
)

// defaultBounds are the bounds of the fields that size the proxy's memory,
// CPU or connections, and of a fleet's resources of each kind. A floor
// keeps a value from spending CPU (health checks, DNS queries, outlier
// detection every millisecond), a ceiling from holding memory or
// connections beyond what a fleet's proxy may spend on one EnvoyConfig.
// Where Envoy's own defaults guard against floods (HTTP/2's frame limits),
// the ceiling is Envoy's default: raising it only opens the proxy to them.
// The fleet counts sum every EnvoyConfig of a fleet, spec.serviceEndpoints
// among its endpoints and spec.tlsSecrets among its secrets; each is below
// the server's default MaxNamesPerType (10000).
var defaultBounds = map[string]Bound{
	// Health checks: each one a request to every endpoint.
	"envoy.config.core.v3.HealthCheck.interval":                    {1 * sec, 1 * hr},
	"envoy.config.core.v3.HealthCheck.timeout":                     {10 * ms, 60 * sec},
	"envoy.config.core.v3.HealthCheck.no_traffic_interval":         {1 * sec, 1 * hr},
	"envoy.config.core.v3.HealthCheck.no_traffic_healthy_interval": {1 * sec, 1 * hr},
	"envoy.config.core.v3.HealthCheck.unhealthy_interval":          {1 * sec, 1 * hr},
	"envoy.config.core.v3.HealthCheck.unhealthy_edge_interval":     {1 * sec, 1 * hr},
	"envoy.config.core.v3.HealthCheck.healthy_edge_interval":       {1 * sec, 1 * hr},
	"envoy.config.core.v3.HealthCheck.interval_jitter":             {0, 1 * hr},
	"envoy.config.core.v3.HealthCheck.initial_jitter":              {0, 1 * hr},
	"envoy.config.core.v3.HealthCheck.interval_jitter_percent":     {0, 100},
	"envoy.config.cluster.v3.OutlierDetection.interval":            {1 * sec, 1 * hr},
	// Name resolution and cleanup, per cluster.
	"envoy.config.cluster.v3.Cluster.RefreshRate.base_interval": {1 * sec, 24 * hr},
	"envoy.config.cluster.v3.Cluster.RefreshRate.max_interval":  {1 * sec, 24 * hr},
	"envoy.config.cluster.v3.Cluster.cleanup_interval":          {1 * sec, 24 * hr},
	"envoy.config.cluster.v3.Cluster.connect_timeout":           {1 * ms, 5 * 60 * sec},
	"envoy.config.core.v3.KeepaliveSettings.interval":           {1 * sec, 1 * hr},
	"envoy.config.core.v3.KeepaliveSettings.timeout":            {1 * sec, 1 * hr},
	// Buffers, per connection.
	"envoy.config.cluster.v3.Cluster.per_connection_buffer_limit_bytes":   {1 * kib, 16 * mib},
	"envoy.config.listener.v3.Listener.per_connection_buffer_limit_bytes": {1 * kib, 16 * mib},
	// HTTP/2's windows and streams, per connection, and its flood limits
	// (whose ceilings are Envoy's defaults).
	"envoy.config.core.v3.Http2ProtocolOptions.max_concurrent_streams":                               {1, 10000},
	"envoy.config.core.v3.Http2ProtocolOptions.initial_stream_window_size":                           {65535, 16 * mib},
	"envoy.config.core.v3.Http2ProtocolOptions.initial_connection_window_size":                       {65535, 16 * mib},
	"envoy.config.core.v3.Http2ProtocolOptions.max_outbound_frames":                                  {1, 10000},
	"envoy.config.core.v3.Http2ProtocolOptions.max_outbound_control_frames":                          {1, 1000},
	"envoy.config.core.v3.Http2ProtocolOptions.max_consecutive_inbound_frames_with_empty_payload":    {0, 1},
	"envoy.config.core.v3.Http2ProtocolOptions.max_inbound_priority_frames_per_stream":               {0, 100},
	"envoy.config.core.v3.Http2ProtocolOptions.max_inbound_window_update_frames_per_data_frame_sent": {1, 10},
	"envoy.config.core.v3.QuicProtocolOptions.max_concurrent_streams":                                {1, 10000},
	"envoy.config.core.v3.QuicProtocolOptions.initial_stream_window_size":                            {1, 16 * mib},
	"envoy.config.core.v3.QuicProtocolOptions.initial_connection_window_size":                        {1, 16 * mib},
	// Headers, per request.
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.max_request_headers_kb": {1, 96},
	"envoy.config.core.v3.HttpProtocolOptions.max_headers_count":                                               {1, 1000},
	"envoy.config.core.v3.HttpProtocolOptions.max_response_headers_kb":                                         {1, 96},
	// Connections and requests, per cluster.
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_connections":      {1, 100000},
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_pending_requests": {1, 100000},
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_requests":         {1, 100000},
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_retries":          {0, 100000},
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.max_connection_pools": {1, 100000},
	// Connections, per listener: opting out of the fleet's global
	// connection limit is the administrator's to allow.
	"envoy.config.listener.v3.Listener.ignore_global_conn_limit":                   {0, 0},
	"envoy.config.listener.v3.Listener.bypass_overload_manager":                    {0, 0},
	"envoy.config.listener.v3.Listener.tcp_backlog_size":                           {1, 65535},
	"envoy.config.listener.v3.Listener.max_connections_to_accept_per_socket_event": {1, 1000},
	// Memory of load balancers, buffers, caches and rate limiters; retries
	// and redirects, which multiply a request; timers, whose floors keep
	// them from spending CPU.
	"envoy.config.cluster.v3.Cluster.MaglevLbConfig.table_size":                                                                       {1, 65537},
	"envoy.config.cluster.v3.Cluster.RingHashLbConfig.minimum_ring_size":                                                              {1, 1 << 20},
	"envoy.config.cluster.v3.Cluster.RingHashLbConfig.maximum_ring_size":                                                              {1, 8 << 20},
	"envoy.config.cluster.v3.Cluster.LeastRequestLbConfig.choice_count":                                                               {2, 100},
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds.RetryBudget.min_retry_concurrency":                                            {1, 100000},
	"envoy.config.route.v3.RouteConfiguration.max_direct_response_body_size_bytes":                                                    {0, 1 * mib},
	"envoy.config.route.v3.Route.request_body_buffer_limit":                                                                           {0, 16 * mib},
	"envoy.config.route.v3.VirtualHost.request_body_buffer_limit":                                                                     {0, 16 * mib},
	"envoy.config.common.matcher.v3.HttpGenericBodyMatch.bytes_limit":                                                                 {0, 1 * mib},
	"envoy.config.core.v3.AlternateProtocolsCacheOptions.max_entries":                                                                 {1, 10000},
	"envoy.config.core.v3.GrpcService.EnvoyGrpc.max_receive_message_length":                                                           {1, 16 * mib},
	"envoy.config.core.v3.HealthCheck.HttpHealthCheck.response_buffer_size":                                                           {0, 1 * mib},
	"envoy.config.core.v3.Http2ProtocolOptions.hpack_table_size":                                                                      {0, 64 * kib},
	"envoy.config.core.v3.Http2ProtocolOptions.max_metadata_size":                                                                     {0, 1 * mib},
	"envoy.config.core.v3.Http2ProtocolOptions.max_header_field_size_kb":                                                              {1, 96},
	"envoy.config.core.v3.KeepaliveSettings.connection_idle_interval":                                                                 {1 * sec, 1 * hr},
	"envoy.config.core.v3.RetryPolicy.num_retries":                                                                                    {0, 10},
	"envoy.config.route.v3.RetryPolicy.num_retries":                                                                                   {0, 10},
	"envoy.config.route.v3.RetryPolicy.host_selection_retry_max_attempts":                                                             {1, 10},
	"envoy.config.route.v3.RetryPolicy.RetryBackOff.base_interval":                                                                    {1 * ms, 1 * hr},
	"envoy.config.route.v3.RetryPolicy.RetryBackOff.max_interval":                                                                     {1 * ms, 1 * hr},
	"envoy.config.route.v3.RetryPolicy.RateLimitedRetryBackOff.max_interval":                                                          {1 * ms, 1 * hr},
	"envoy.config.core.v3.BackoffStrategy.base_interval":                                                                              {10 * ms, 1 * hr},
	"envoy.config.core.v3.BackoffStrategy.max_interval":                                                                               {10 * ms, 24 * hr},
	"envoy.config.route.v3.InternalRedirectPolicy.max_internal_redirects":                                                             {0, 10},
	"envoy.config.trace.v3.OpenTelemetryConfig.max_cache_size":                                                                        {1, 10000},
	"envoy.config.trace.v3.DatadogRemoteConfig.polling_interval":                                                                      {10 * sec, 24 * hr},
	"envoy.extensions.compression.gzip.compressor.v3.Gzip.window_bits":                                                                {9, 15},
	"envoy.extensions.compression.gzip.compressor.v3.Gzip.chunk_size":                                                                 {4 * kib, 64 * kib},
	"envoy.extensions.filters.http.fault.v3.HTTPFault.max_active_faults":                                                              {0, 100000},
	"envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit.max_dynamic_descriptors":                                         {1, 10000},
	"envoy.extensions.filters.http.router.v3.Router.UpstreamAccessLogOptions.upstream_log_flush_interval":                             {1 * sec, 1 * hr},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.HcmAccessLogOptions.access_log_flush_interval": {1 * sec, 1 * hr},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.TcpAccessLogOptions.access_log_flush_interval":                            {1 * sec, 1 * hr},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.Tracing.max_path_tag_length":                   {1, 1024},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.max_connect_attempts":                                                     {1, 10},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.max_early_data_bytes":                                                     {0, 1 * mib},
	"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector.initial_read_buffer_size":                                        {1, 64 * kib},
	"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector.max_client_hello_size":                                           {1, 64 * kib},
	"envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext.max_verify_depth":                                         {1, 100},
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext.max_session_keys":                                                   {0, 1000},
	"envoy.extensions.compression.gzip.compressor.v3.Gzip.memory_level":                                                               {1, 9},
	// Deprecated fields that Envoy still takes.
	"envoy.config.cluster.v3.Cluster.dns_refresh_rate":                                                            {1 * sec, 24 * hr},
	"envoy.config.cluster.v3.Cluster.dns_jitter":                                                                  {0, 1 * hr},
	"envoy.config.route.v3.Route.per_request_buffer_limit_bytes":                                                  {0, 16 * mib},
	"envoy.config.route.v3.VirtualHost.per_request_buffer_limit_bytes":                                            {0, 16 * mib},
	"envoy.config.route.v3.RouteAction.max_internal_redirects":                                                    {0, 10},
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.access_log_flush_interval": {1 * sec, 1 * hr},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.access_log_flush_interval":                            {1 * sec, 1 * hr},
	"envoy.type.matcher.v3.RegexMatcher.GoogleRE2.max_program_size":                                               {0, 100},
}

// A fleet's resources, by kind: each kind's ceiling (resource.Kind.FleetCeiling).
func init() {
	for _, k := range resource.Kinds {
		defaultBounds[fleetPrefix+k.Field] = Bound{0, k.FleetCeiling}
	}
}

// bound returns the bound of name, a field's full name or a fleet count.
func (b Bounds) bound(name string) (Bound, bool) {
	if v, ok := b[name]; ok {
		return v, true
	}
	v, ok := defaultBounds[name]
	return v, ok
}

// ParseBounds reads the value of BoundsFlag: comma-separated
// <name>=<min>:<max>, where name is a bounded field's full name (as
// fields.txt names it) or fleet.<kind> (fleet.clusters), and min and max
// are durations (1s, 500ms) for a duration's field, true or false for a
// bool's, whole numbers otherwise. Either may be left out, for the
// default's.
func ParseBounds(v string) (Bounds, error) {
	out := Bounds{}
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, rng, ok := strings.Cut(item, "=")
		lo, hi, ok2 := strings.Cut(rng, ":")
		if !ok || !ok2 {
			return nil, fmt.Errorf("%s: %q is not <field>=<min>:<max>", BoundsFlag, item)
		}
		def, known := defaultBounds[name]
		if !known {
			return nil, fmt.Errorf("%s: %q is no bounded field (the bounded fields are those of class bound in the classification table, and fleet.<kind>)", BoundsFlag, name)
		}
		b := def
		var err error
		if lo != "" {
			if b.Min, err = parseBoundValue(name, lo); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", BoundsFlag, name, err)
			}
		}
		if hi != "" {
			if b.Max, err = parseBoundValue(name, hi); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", BoundsFlag, name, err)
			}
		}
		if b.Min > b.Max {
			return nil, fmt.Errorf("%s: %s: the floor %s is above the ceiling %s", BoundsFlag, name, formatBound(name, b.Min), formatBound(name, b.Max))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: %s is bounded twice", BoundsFlag, name)
		}
		out[name] = b
	}
	if len(out) == 0 {
		return nil, nil // the defaults
	}
	return out, nil
}

// String is b as ParseBounds reads it, in the order of the names.
func (b Bounds) String() string {
	names := make([]string, 0, len(b))
	for name := range b {
		names = append(names, name)
	}
	sort.Strings(names)
	items := make([]string, len(names))
	for i, name := range names {
		items[i] = name + "=" + formatBound(name, b[name].Min) + ":" + formatBound(name, b[name].Max)
	}
	return strings.Join(items, ",")
}

// FitFleetCounts returns b with each fleet count's ceiling below
// maxNamesPerType, the xDS server's limit of names per type on one stream,
// so that a fleet admitted never holds more names of a type than its
// proxies' streams may subscribe to: a default's ceiling is lowered to fit,
// one b sets above it is an error.
func (b Bounds) FitFleetCounts(maxNamesPerType int) (Bounds, error) {
	out := Bounds{}
	for name, v := range b {
		out[name] = v
	}
	for _, k := range resource.Kinds {
		name := fleetPrefix + k.Field
		v, _ := b.bound(name)
		if v.Max < int64(maxNamesPerType) {
			continue
		}
		if _, set := b[name]; set {
			return nil, fmt.Errorf("%s: %s=%d: a fleet's %s must be fewer than the xDS server's %d names per type on one stream (--xds-max-names-per-type), "+
				"or the server would refuse its proxies", BoundsFlag, name, v.Max, k.Field, maxNamesPerType)
		}
		v.Max = int64(maxNamesPerType) - 1
		v.Min = min(v.Min, v.Max)
		out[name] = v
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// boundKind is how a bounded field's value reads: a duration, a bool, or a
// whole number (in a wrapper message or not).
func boundKind(name string) string {
	fd := boundedField(name)
	switch {
	case fd == nil:
		return "number"
	case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Duration":
		return "duration"
	case fd.Kind() == protoreflect.BoolKind, fd.Message() != nil && fd.Message().FullName() == "google.protobuf.BoolValue":
		return "bool"
	}
	return "number"
}

// boundedField returns the field that name names, or nil for a fleet count.
func boundedField(name string) protoreflect.FieldDescriptor {
	if strings.HasPrefix(name, fleetPrefix) {
		return nil
	}
	return boundedFields[protoreflect.FullName(name)]
}

// boundedFields are the fields of defaultBounds, found among the types an
// EnvoyConfig reaches.
var boundedFields = func() map[protoreflect.FullName]protoreflect.FieldDescriptor {
	out := map[protoreflect.FullName]protoreflect.FieldDescriptor{}
	types, _ := reachableTypes() // TestBounds fails if it cannot list them
	for _, md := range types {
		fs := md.Fields()
		for i := range fs.Len() {
			if _, ok := defaultBounds[string(fs.Get(i).FullName())]; ok {
				out[fs.Get(i).FullName()] = fs.Get(i)
			}
		}
	}
	return out
}()

func parseBoundValue(name, s string) (int64, error) {
	switch boundKind(name) {
	case "duration":
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%q is not a duration of at least 0 (e.g. 500ms, 10s)", s)
		}
		return int64(d), nil
	case "bool":
		b, err := strconv.ParseBool(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not true or false", s)
		}
		if b {
			return 1, nil
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a whole number of at least 0", s)
	}
	return n, nil
}

func formatBound(name string, v int64) string {
	switch boundKind(name) {
	case "duration":
		return time.Duration(v).String()
	case "bool":
		return strconv.FormatBool(v != 0)
	}
	return strconv.FormatInt(v, 10)
}

// boundValue returns what a bounded field's value v counts, in the units of
// Bound.
func boundValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (int64, bool) {
	if fd.Message() != nil {
		m := v.Message()
		if fd.Message().FullName() == "google.protobuf.Duration" {
			d := m.Interface().(*durationpb.Duration)
			if d.GetSeconds() > math.MaxInt64/int64(time.Second)-1 {
				return math.MaxInt64, true
			}
			return d.GetSeconds()*int64(time.Second) + int64(d.GetNanos()), true
		}
		// A wrapper: its value.
		vf := fd.Message().Fields().ByName("value")
		if vf == nil {
			return 0, false
		}
		return scalarValue(vf, m.Get(vf))
	}
	return scalarValue(fd, v)
}

func scalarValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (int64, bool) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int(), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if v.Uint() > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(v.Uint()), true
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		return int64(math.Round(v.Float())), true
	}
	return 0, false
}

// check returns why the value v of fd, a bounded field, is past its bounds,
// or nil.
func (b Bounds) check(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	name := string(fd.FullName())
	bd, ok := b.bound(name)
	if !ok {
		return fmt.Errorf("is classified as bounded, but has no bounds (%s)", name)
	}
	n, ok := boundValue(fd, v)
	if !ok {
		return fmt.Errorf("holds a value whose size this check cannot read (%s)", name)
	}
	return bd.judge(name, n)
}

func (bd Bound) judge(name string, n int64) error {
	switch {
	case bd.Min == 0 && bd.Max == 0 && boundKind(name) == "bool" && n != 0:
		return fmt.Errorf("is true, which only the cluster administrator may allow (%s %s=false:true)", BoundsFlag, name)
	case n < bd.Min:
		return fmt.Errorf("is %s, below its floor %s (%s %s=<min>:<max> changes it)", formatBound(name, n), formatBound(name, bd.Min), BoundsFlag, name)
	case n > bd.Max:
		return fmt.Errorf("is %s, above its ceiling %s (%s %s=<min>:<max> changes it)", formatBound(name, n), formatBound(name, bd.Max), BoundsFlag, name)
	}
	return nil
}

// fleetCounts returns, for each kind of resource, a message when the
// fleet of configs after a change holds more than its bound and more than
// the fleet before it did (a fleet already past a lowered bound may shrink,
// or change without growing): spec.resources' valid resources, with
// spec.serviceEndpoints among the endpoints and spec.tlsSecrets among the
// secrets.
func (b Bounds) fleetCounts(before, after []Config) []string {
	was, will := countsOf(before), countsOf(after)
	var out []string
	for _, k := range resource.Kinds {
		name := fleetPrefix + k.Field
		bd, _ := b.bound(name)
		if n := will[k.Field]; n > bd.Max && n > was[k.Field] {
			out = append(out, fmt.Sprintf("the fleet would hold %d %s (spec.resources.%s), above its ceiling %d (%s %s=<min>:<max> changes it)",
				n, k.Field, k.Field, bd.Max, BoundsFlag, name))
		}
	}
	return out
}

// countsOf counts the resources of configs by kind (the field of
// spec.resources).
func countsOf(configs []Config) map[string]int64 {
	counts := map[string]int64{}
	for _, c := range configs {
		p, _ := parse(c)
		for _, r := range p.resources {
			counts[r.Kind.Field]++
		}
		counts["endpoints"] += int64(len(c.Spec.ServiceEndpoints))
		counts["secrets"] += int64(len(c.Spec.TLSSecrets))
	}
	return counts
}

// overgrown returns, by EnvoyConfig, why its chosen content is not served
// when the fleet's chosen content (choice) holds more of a kind than its
// bound and more than the published content did: content that bypassed
// admission, which refuses such a change first (fleetCounts). Every
// EnvoyConfig whose chosen content holds more of that kind than its
// published content (none, when it was never published) falls back, so
// that the fleet holds no more than it was served: a proxy is never sent
// more names than the server takes on one stream.
func (b Bounds) overgrown(choice, published map[string]Config) map[string][]string {
	will, was := countsOf(configsOf(choice)), countsOf(configsOf(published))
	out := map[string][]string{}
	for _, k := range resource.Kinds {
		name := fleetPrefix + k.Field
		bd, _ := b.bound(name)
		n := will[k.Field]
		if n <= bd.Max || n <= was[k.Field] {
			continue
		}
		for _, c := range configsOf(choice) {
			mine := countsOf([]Config{c})[k.Field]
			before := int64(0)
			if p, ok := published[c.Name]; ok {
				before = countsOf([]Config{p})[k.Field]
			}
			if mine > before {
				out[c.Name] = append(out[c.Name], fmt.Sprintf("the fleet would hold %d %s (spec.resources.%s), above its ceiling %d (%s %s=<min>:<max> changes it): this change, which adds %d, is not served",
					n, k.Field, k.Field, bd.Max, BoundsFlag, name, mine-before))
			}
		}
	}
	return out
}
