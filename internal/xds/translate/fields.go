package translate

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Deny by default: what an EnvoyConfig may hold is what this file admits,
// field by field, not what the policy's rules happen to miss.
//
// An Any (a typed_config, a typed_per_filter_config's value, a tracer's
// configuration) may hold only a message type of admittedTypes: the
// extensions this operator serves. Every field of every message type that
// an EnvoyConfig's resources reach, through the admitted types, has one
// class in fields.txt, the classification table; a field set in an
// EnvoyConfig is judged by its class, and one the table does not name is
// refused ("is not classified: the operator does not serve it"). The table
// is the one place each of these facts is stated: the file fields and what
// the proxy does with their paths, the environment variables' fields, the
// destinations (destinationFields judges how), the
// discovery sources and what they discover, the bounded fields (whose
// floors and ceilings bounds.go holds) and the forbidden fields with why.
// TestFieldsAreAllClassified walks every reachable message type and fails
// on a field the table lacks, and on an entry that is no field any more.

// admittedTypes are the message types an Any in an EnvoyConfig may hold:
// the extensions whose typed_config the operator serves, and the core types
// Envoy takes as typed config. Any other type is refused, naming the field
// and the type. Adding an extension means adding its types here (and
// importing its package in internal/xds/resource/extensions.go, which
// registers them), then running TestFieldsAreAllClassified with -update to
// propose a class for each of its new fields, and reviewing every one of
// them in fields.txt: plain only for what is safe whatever its value.
var admittedTypes = []protoreflect.FullName{
	// Access loggers.
	"envoy.extensions.access_loggers.file.v3.FileAccessLog",
	"envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
	"envoy.extensions.access_loggers.stream.v3.StderrAccessLog",
	// HTTP filters, and their per-route configuration.
	"envoy.extensions.filters.http.compressor.v3.Compressor",
	"envoy.extensions.filters.http.compressor.v3.CompressorPerRoute",
	"envoy.extensions.compression.gzip.compressor.v3.Gzip",
	"envoy.extensions.filters.http.cors.v3.Cors",
	"envoy.extensions.filters.http.cors.v3.CorsPolicy",
	"envoy.extensions.filters.http.fault.v3.HTTPFault",
	"envoy.extensions.filters.http.grpc_web.v3.GrpcWeb",
	"envoy.extensions.filters.http.health_check.v3.HealthCheck",
	"envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
	"envoy.extensions.filters.http.rbac.v3.RBAC",
	"envoy.extensions.filters.http.rbac.v3.RBACPerRoute",
	"envoy.extensions.filters.http.router.v3.Router",
	// Listener filters.
	"envoy.extensions.filters.listener.http_inspector.v3.HttpInspector",
	"envoy.extensions.filters.listener.original_dst.v3.OriginalDst",
	"envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol",
	"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
	// Network filters.
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
	// Transport sockets.
	"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
	// A cluster's typed_extension_protocol_options.
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
	// Tracers, whose destinations the policy judges.
	"envoy.config.trace.v3.ZipkinConfig",
	"envoy.config.trace.v3.OpenTelemetryConfig",
	"envoy.config.trace.v3.DatadogConfig",
	"envoy.config.trace.v3.XRayConfig",
	// The actions and inputs of the matchers of virtual hosts and filters.
	"envoy.config.route.v3.Route",
	"envoy.type.matcher.v3.HttpRequestHeaderMatchInput",
	"envoy.type.matcher.v3.HttpResponseHeaderMatchInput",
}

// fieldClass is what a field is to the content policy.
type fieldClass string

const (
	// plain: safe whatever its value, beyond the rules every string obeys
	// (the substitution formatter's environment variables, the bootstrap's
	// cluster names).
	plain fieldClass = "plain"
	// destination: names where the proxy connects or sends; judged as a
	// cluster's endpoints are (destinationFields says how it names one).
	destination fieldClass = "destination"
	// file: a path of the proxy's file system; its detail is what the proxy
	// does with it (a fileUse), judged by Policy.file.
	file fieldClass = "file"
	// environment: names an environment variable, judged by Policy.env.
	environment fieldClass = "environment"
	// discovery: a config source; its detail is the discovery service of
	// what it discovers, which must be one the server serves.
	discovery fieldClass = "discovery"
	// bounded: sizes memory, CPU or connections; judged by the bounds
	// (bounds.go).
	bounded fieldClass = "bound"
	// forbidden: refused whatever its value; its detail says why.
	forbidden fieldClass = "forbidden"
)

var fieldClasses = []fieldClass{plain, destination, file, environment, discovery, bounded, forbidden}

// classified is one entry of the table.
type classified struct {
	class fieldClass
	// detail is the file use, the discovery service, or why a field is
	// forbidden.
	detail string
}

//go:embed fields.txt
var fieldsTable string

// fieldTable is fields.txt: per field, by its full name, its class.
var fieldTable = mustParseFieldTable(fieldsTable)

// parseFieldTable reads the table: one field a line, "<full name> <class>
// [<detail>]", with blank lines and comments (from "#") between them.
func parseFieldTable(text string) (map[protoreflect.FullName]classified, error) {
	out := map[protoreflect.FullName]classified{}
	for i, line := range strings.Split(text, "\n") {
		if j := strings.Index(line, "#"); j >= 0 {
			line = line[:j]
		}
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		if len(words) < 2 {
			return nil, fmt.Errorf("fields.txt:%d: want a field's full name and its class", i+1)
		}
		name, c := protoreflect.FullName(words[0]), classified{class: fieldClass(words[1]), detail: strings.Join(words[2:], " ")}
		if !slices.Contains(fieldClasses, c.class) {
			return nil, fmt.Errorf("fields.txt:%d: %s: %q is no class (%v)", i+1, name, c.class, fieldClasses)
		}
		needsDetail := c.class == file || c.class == discovery || c.class == forbidden
		if needsDetail != (c.detail != "") {
			return nil, fmt.Errorf("fields.txt:%d: %s: a %s field has a detail if and only if it is file, discovery or forbidden", i+1, name, c.class)
		}
		if c.class == file && !slices.Contains(fileUses, fileUse(c.detail)) {
			return nil, fmt.Errorf("fields.txt:%d: %s: %q is no file use (%q)", i+1, name, c.detail, fileUses)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("fields.txt:%d: %s is classified twice", i+1, name)
		}
		out[name] = c
	}
	return out, nil
}

func mustParseFieldTable(text string) map[protoreflect.FullName]classified {
	t, err := parseFieldTable(text)
	if err != nil {
		panic(err)
	}
	return t
}

// classOf returns the table's entries of one class, with their details.
func classOf(c fieldClass) map[protoreflect.FullName]string {
	out := map[protoreflect.FullName]string{}
	for name, e := range fieldTable {
		if e.class == c {
			out[name] = e.detail
		}
	}
	return out
}

// isAdmitted reports whether an Any may hold the message type name.
func isAdmitted(name protoreflect.FullName) bool {
	return slices.Contains(admittedTypes, name)
}

// servedDiscovery are the discovery services of what the server serves
// (resource.Kinds): what a discovery field may discover.
var servedDiscovery = func() []string {
	var out []string
	for _, k := range resource.Kinds {
		out = append(out, k.Short)
	}
	return out
}()

// classifiedField is a field of a message type and its entry in the table;
// ok is false for a field the table does not name.
type classifiedField struct {
	fd protoreflect.FieldDescriptor
	classified
	ok bool
}

// classesByType holds, per message type (its descriptor, a key that costs
// no allocation), its fields and their entries.
var classesByType sync.Map // protoreflect.MessageDescriptor -> []classifiedField

func classesOf(md protoreflect.MessageDescriptor) []classifiedField {
	if v, ok := classesByType.Load(md); ok {
		return v.([]classifiedField)
	}
	fs := md.Fields()
	out := make([]classifiedField, fs.Len())
	for i := range fs.Len() {
		c, ok := fieldTable[fs.Get(i).FullName()]
		out[i] = classifiedField{fd: fs.Get(i), classified: c, ok: ok}
	}
	classesByType.Store(md, out)
	return out
}

// classify refuses, in m at path at, every field set that the table does
// not name, every forbidden one, every discovery source of a type the
// server does not serve, every file and environment variable the policy
// does not allow, and every bounded value past its bounds.
func (c checker) classify(m protoreflect.Message, at string) {
	for _, f := range classesOf(m.Descriptor()) {
		if f.ok && f.class == plain || f.ok && f.class == destination || !m.Has(f.fd) {
			continue
		}
		name := field(at, string(f.fd.Name()))
		v := m.Get(f.fd)
		switch {
		case !f.ok:
			c.refused[name] = true
			c.refuse(name, fmt.Errorf("is not classified: the operator does not serve it (%s)", f.fd.FullName()))
		case f.class == forbidden:
			c.refused[name] = true
			c.refuse(name, fmt.Errorf("%s (%s)", f.detail, f.fd.FullName()))
		case f.class == discovery && !slices.Contains(servedDiscovery, f.detail):
			c.refuse(name, fmt.Errorf("discovers by %s, which the server does not serve (it serves %s)", f.detail, strings.Join(servedDiscovery, ", ")))
		case f.class == file:
			if err := c.pol.file(v.String(), fileUse(f.detail)); err != nil {
				c.refuse(name, err)
			}
		case f.class == environment:
			if err := c.pol.env(v.String()); err != nil {
				c.refuse(name, err)
			}
		case f.class == bounded:
			if err := c.pol.Bounds.check(f.fd, v); err != nil {
				c.refuse(name, err)
			}
		}
	}
}

// reachableTypes returns every message type that an EnvoyConfig's
// resources reach: the resources' own (resource.Kinds), the admitted types
// an Any may hold, and every type their fields hold, at any depth. What an
// Any holds is one of the admitted types, so the Any's own fields are not
// among them (Walk never visits an Any); nor are the entries of a map, but
// their values are.
func reachableTypes() ([]protoreflect.MessageDescriptor, error) {
	var roots []protoreflect.FullName
	for _, k := range resource.Kinds {
		roots = append(roots, protoreflect.FullName(strings.TrimPrefix(k.TypeURL, "type.googleapis.com/")))
	}
	roots = append(roots, admittedTypes...)
	seen := map[protoreflect.FullName]bool{}
	var out []protoreflect.MessageDescriptor
	var visit func(md protoreflect.MessageDescriptor)
	visit = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		if md.FullName() == "google.protobuf.Any" {
			return
		}
		if !md.IsMapEntry() {
			out = append(out, md)
		}
		fs := md.Fields()
		for i := range fs.Len() {
			if fd := fs.Get(i); fd.Message() != nil {
				visit(fd.Message())
			}
		}
	}
	for _, name := range roots {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (is its package imported in internal/xds/resource/extensions.go?)", name, err)
		}
		visit(mt.Descriptor())
	}
	return out, nil
}
