package translate

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/envoy/annotations"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Every field of every message type an EnvoyConfig reaches, through the
// admitted types, has a class in fields.txt, and every entry of fields.txt
// is such a field: a new extension, or a new release of Envoy's API, fails
// here until its fields are classified. With -update, the table is
// rewritten: its entries as they are, and for each field it lacks a class
// that proposeClass proposes, marked "proposed" for review.
func TestFieldsAreAllClassified(t *testing.T) {
	types, err := reachableTypes()
	if err != nil {
		t.Fatal(err)
	}
	fields := map[protoreflect.FullName]protoreflect.FieldDescriptor{}
	for _, md := range types {
		fs := md.Fields()
		for i := range fs.Len() {
			fields[fs.Get(i).FullName()] = fs.Get(i)
		}
	}
	if *update {
		if err := os.WriteFile("fields.txt", []byte(writeFieldTable(types, fieldTable, readNotes(t))), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for name, fd := range fields {
		if _, ok := fieldTable[name]; !ok {
			t.Errorf("%s is not classified: give it a class in fields.txt (go test -run TestFieldsAreAllClassified -update proposes one: review it)", name)
			continue
		}
		if strings.Contains(fieldNotes[name], "proposed") {
			t.Errorf("%s: its class was proposed, not reviewed: review it, and say why in its note", fd.FullName())
		}
	}
	for name := range fieldTable {
		if fields[name] == nil {
			t.Errorf("fields.txt classifies %s, which no message an EnvoyConfig reaches has", name)
		}
	}
}

// Each class's entries are what the policy judges them by.
func TestFieldClassesAreJudged(t *testing.T) {
	for name, c := range fieldTable {
		switch c.class {
		case destination:
			if _, ok := destinationFields[name]; !ok {
				t.Errorf("%s is a destination, which destinationFields does not judge", name)
			}
		case bounded:
			if _, ok := defaultBounds[string(name)]; !ok {
				t.Errorf("%s is bounded, and has no bound in defaultBounds", name)
			}
		case discovery:
			if !slices.Contains(servedDiscovery, c.detail) {
				t.Errorf("%s discovers by %s, which the server does not serve: classify it forbidden until it does", name, c.detail)
			}
		}
	}
	for name := range destinationFields {
		if c, ok := fieldTable[name]; ok && c.class != destination {
			t.Errorf("destinationFields judges %s, which fields.txt classifies %q", name, fieldTable[name].class)
		}
	}
	for name := range defaultBounds {
		if strings.HasPrefix(name, fleetPrefix) {
			continue
		}
		if fieldTable[protoreflect.FullName(name)].class != bounded {
			t.Errorf("defaultBounds bounds %s, which fields.txt classifies %q", name, fieldTable[protoreflect.FullName(name)].class)
		}
	}
}

// Every admitted type is registered (its package imported in
// internal/xds/resource/extensions.go) and listed once; no registered
// extension type is left unlisted without a word.
func TestAdmittedTypes(t *testing.T) {
	seen := map[protoreflect.FullName]bool{}
	for _, name := range admittedTypes {
		if seen[name] {
			t.Errorf("%s is admitted twice", name)
		}
		seen[name] = true
		if _, err := protoregistry.GlobalTypes.FindMessageByName(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// An Any's content of a type that is not admitted is refused, naming the
// field and the type; an admitted one is judged field by field.
func TestUnadmittedTypesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      [][2]string
	}{
		{"an endpoint as an access log",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "x", "typed_config": {"@type": "type.googleapis.com/envoy.config.endpoint.v3.Endpoint", "address": {"socket_address": {"address": "10.0.0.1", "port_value": 80}}}}]`),
			[][2]string{{hcm + "access_log[0].typed_config(Endpoint)", "holds the type envoy.config.endpoint.v3.Endpoint, which is not an extension the operator serves"}}},
		{"a dynamic OpenTracing tracer, whose library the proxy would load",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.dynamic_ot", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.DynamicOtConfig", "library": "/etc/allowed/tracer.so"}}}`),
			[][2]string{{hcm + "tracing.provider.typed_config(DynamicOtConfig)", "envoy.config.trace.v3.DynamicOtConfig, which is not an extension the operator serves"}}},
		{"a statsd sink as an access log",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "x", "typed_config": {"@type": "type.googleapis.com/envoy.config.metrics.v3.StatsdSink", "address": {"socket_address": {"protocol": "UDP", "address": "168.63.129.16", "port_value": 8125}}}}]`),
			[][2]string{{hcm + "access_log[0].typed_config(StatsdSink)", "envoy.config.metrics.v3.StatsdSink, which is not an extension the operator serves"}}},
		{"an admitted tracer",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {"@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig", "collector_cluster": "c", "collector_endpoint": "/api/v2/spans", "collector_endpoint_version": "HTTP_JSON"}}}`),
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRefusals(t, refusalsOf(t, "team", "listeners", tc.raw), tc.want)
		})
	}
}

// checkRefusals checks got, refusals of the first resource of its kind,
// against want: for each, the field it names and a part of why.
func checkRefusals(t *testing.T, got []string, want [][2]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("refusals %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], ": "+w[0]+" ") || !strings.Contains(got[i], w[1]) {
			t.Errorf("refusal %q, want it to name %s and say %q", got[i], w[0], w[1])
		}
	}
}

// hcm is the path of the first listener's connection manager.
const hcm = "filter_chains[0].filters[0].typed_config(HttpConnectionManager)."

// Fields set that the table does not classify, forbidden fields, and
// discovery of what the server does not serve are refused, naming the
// field; those of plain classes pass.
func TestClassesAreEnforced(t *testing.T) {
	for _, tc := range []struct {
		name, kind, raw string
		want            [][2]string
	}{
		{"scoped routes", "listeners",
			`{"name": "l", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}}, "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {` +
				`"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": "h", ` +
				`"scoped_routes": {"name": "s", "scope_key_builder": {"fragments": [{"header_value_extractor": {"name": "x", "index": 0}}]}, "rds_config_source": {"ads": {}}, "scoped_rds": {"scoped_rds_config_source": {"ads": {}}}}, ` +
				`"http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`,
			[][2]string{{hcm + "scoped_routes", "scoped routes"}}},
		{"virtual host discovery", "routes",
			`{"name": "r", "vhds": {"config_source": {"ads": {}}}}`,
			[][2]string{{"vhds", "virtual host discovery"}}},
		{"extension config discovery", "listeners",
			`{"name": "l", "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}}, "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {` +
				`"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", "stat_prefix": "h", "route_config": ` + directResponse(`{"inline_string": "x"}`) + `, ` +
				`"http_filters": [{"name": "f", "config_discovery": {"config_source": {"ads": {}}, "type_urls": ["type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"]}}, ` +
				`{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}`,
			[][2]string{{hcm + "http_filters[0].config_discovery", "extension config discovery"}}},
		{"load reporting", "clusters",
			staticCluster("c", "10.0.0.1", 80, `, "lrs_server": {"self": {}}`),
			[][2]string{{"lrs_server", "load report"}}},
		{"socket options and a transparent listener", "listeners",
			strings.Replace(tcpProxyListener("k"), `"name": "relay", `, `"name": "relay", "transparent": true, "socket_options": [{"level": 1, "name": 36, "int_value": 1}], `, 1),
			[][2]string{{"socket_options", "sets socket options by their numbers"}, {"transparent", "IP_TRANSPARENT"}}},
		{"on-demand clusters", "listeners",
			strings.Replace(tcpProxyListener("k"), `"cluster": "k"`, `"cluster": "k", "on_demand": {"odcds_config": {"ads": {}}}`, 1),
			[][2]string{{"filter_chains[0].filters[0].typed_config(TcpProxy).on_demand", "on-demand cluster discovery"}}},
		{"an access log to the container's log", "listeners",
			hcmListener(directResponse(`{"inline_string": "x"}`), `, "access_log": [{"name": "x", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog", "path": "/dev/stdout"}}]`),
			nil},
		{"a TLS key log to the container's log", "clusters",
			staticCluster("c", "10.0.0.1", 443, `, "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", `+
				`"common_tls_context": {"key_log": {"path": "/dev/stderr"}}}}`),
			[][2]string{{"transport_socket.typed_config(UpstreamTlsContext).common_tls_context.key_log.path", "a TLS key log holds the keys"}}},
		{"a TLS key log to stdout", "clusters",
			staticCluster("c", "10.0.0.1", 443, `, "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", `+
				`"common_tls_context": {"key_log": {"path": "/dev/stdout"}}}}`),
			[][2]string{{"transport_socket.typed_config(UpstreamTlsContext).common_tls_context.key_log.path", "the container's log"}}},
		{"a TLS key log to an allowed file", "clusters",
			staticCluster("c", "10.0.0.1", 443, `, "transport_socket": {"name": "tls", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", `+
				`"common_tls_context": {"key_log": {"path": "/etc/allowed/keys"}}}}`),
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRefusals(t, refusalsOf(t, "team", tc.kind, tc.raw), tc.want)
		})
	}
}

// A field the table does not name is refused, naming it, whatever the
// message that holds it: the table is what admits a field, not the rules.
func TestUnclassifiedFieldsAreRefused(t *testing.T) {
	name := protoreflect.FullName("envoy.config.cluster.v3.Cluster.alt_stat_name")
	c, ok := fieldTable[name]
	if !ok {
		t.Fatalf("%s is not in the table", name)
	}
	cluster := (&clusterv3.Cluster{}).ProtoReflect().Descriptor()
	delete(fieldTable, name)
	classesByType.Delete(cluster)
	t.Cleanup(func() {
		fieldTable[name] = c
		classesByType.Delete(cluster)
	})
	// A content no other test judges: no verdict is remembered for it.
	got := refusalsOf(t, "team", "clusters", staticCluster("c", "10.0.0.1", 80, `, "alt_stat_name": "unclassified"`))
	checkRefusals(t, got, [][2]string{{"alt_stat_name", "is not classified: the operator does not serve it (" + string(name) + ")"}})
}

// sizeLike matches the names of numeric fields that may size memory, CPU
// or connections: proposeClass forbids those without bounds.
var sizeLike = regexp.MustCompile(`max_|_max|limit|buffer|window|_bytes|_kb|size|concurren|interval|backlog|jitter|_count|connections|retries|pending|frames|rate`)

// proposeClass proposes a class for a field that fields.txt lacks, and
// which rule proposed it. What it proposes is reviewed before it is
// checked in: plain is proposed only for what no rule suspects.
func proposeClass(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor) (classified, string) {
	name := fd.FullName()
	opts, _ := fd.Options().(*descriptorpb.FieldOptions)
	switch {
	case hasKey(destinationFields, name):
		return classified{class: destination}, "destinationFields"
	case fd.Message() != nil && (fd.Message().FullName() == "envoy.config.core.v3.ConfigSource" || fd.Message().FullName() == "envoy.config.core.v3.ExtensionConfigSource"):
		return classified{class: forbidden, detail: "discovers what the server does not serve"}, "config source"
	case fd.Name() == "config_discovery":
		return classified{class: forbidden, detail: "is extension config discovery, which the server does not serve: write the extension's typed_config"}, "config_discovery"
	case proto.GetExtension(opts, annotations.E_DisallowedByDefault).(bool):
		return classified{class: forbidden, detail: "is deprecated, and Envoy refuses it"}, "disallowed by default"
	case hasKey(defaultBounds, string(name)):
		return classified{class: bounded}, "defaultBounds"
	case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Any":
		return classified{class: plain}, "an Any, which holds an admitted type or is refused"
	case fd.Kind() == protoreflect.StringKind:
		return classified{class: plain}, "string: review"
	case fd.Kind() == protoreflect.BytesKind:
		return classified{class: plain}, "bytes: review"
	case sizeLike.MatchString(string(fd.Name())) && isNumeric(fd):
		return classified{class: forbidden, detail: "sizes the proxy's memory, CPU or connections, and has no bounds"}, "size-like name"
	}
	return classified{class: plain}, "no rule suspects it"
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// isNumeric reports whether fd holds a number, a duration or a wrapper of
// a number.
func isNumeric(fd protoreflect.FieldDescriptor) bool {
	if m := fd.Message(); m != nil {
		return m.FullName() == "google.protobuf.Duration" || strings.HasPrefix(string(m.FullName()), "google.protobuf.") && strings.HasSuffix(string(m.Name()), "Value") && m.Name() != "StringValue" && m.Name() != "BytesValue" && m.Name() != "BoolValue"
	}
	switch fd.Kind() {
	case protoreflect.BoolKind, protoreflect.StringKind, protoreflect.BytesKind, protoreflect.EnumKind:
		return false
	}
	return true
}

// fieldNotes are the notes of fields.txt's entries (what follows "#").
var fieldNotes = func() map[protoreflect.FullName]string {
	b, err := os.ReadFile("fields.txt")
	if err != nil {
		panic(err)
	}
	return notesOf(string(b))
}()

func readNotes(t *testing.T) map[protoreflect.FullName]string {
	t.Helper()
	return fieldNotes
}

func notesOf(text string) map[protoreflect.FullName]string {
	out := map[protoreflect.FullName]string{}
	for _, line := range strings.Split(text, "\n") {
		entry, note, ok := strings.Cut(line, "#")
		if words := strings.Fields(entry); ok && len(words) > 0 {
			out[protoreflect.FullName(words[0])] = strings.TrimSpace(note)
		}
	}
	return out
}

// writeFieldTable writes the table: the fields of types, grouped by type
// in the order of their names, each with its entry in table (or a proposed
// one) and its note.
func writeFieldTable(types []protoreflect.MessageDescriptor, table map[protoreflect.FullName]classified, notes map[protoreflect.FullName]string) string {
	var b strings.Builder
	b.WriteString(fieldTableHeader)
	sorted := slices.Clone(types)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].FullName() < sorted[j].FullName() })
	for _, md := range sorted {
		fs := md.Fields()
		if fs.Len() == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n# %s\n", md.FullName())
		for i := range fs.Len() {
			fd := fs.Get(i)
			c, ok := table[fd.FullName()]
			note := notes[fd.FullName()]
			if !ok {
				var rule string
				c, rule = proposeClass(md, fd)
				note = "proposed (" + rule + ")"
			} else if strings.HasPrefix(note, "rule: ") {
				// Accepted as its rule proposed it: say which rule, as it is now.
				if p, rule := proposeClass(md, fd); p == c {
					note = "rule: " + rule
				}
			}
			line := string(fd.FullName()) + " " + string(c.class)
			if c.detail != "" {
				line += " " + c.detail
			}
			if note != "" {
				line += "  # " + note
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

const fieldTableHeader = `# The classification table of the content policy (fields.go): every field
# of every message type an EnvoyConfig reaches, through the admitted types,
# and its class:
#
#   <field's full name> <class> [<detail>]  # <note>
#
# plain        safe whatever its value (the rules every string obeys apply)
# destination  where the proxy connects or sends (destinationFields says how)
# file         a path of the proxy's file system; detail: what the proxy does
# environment  names an environment variable of the proxy
# discovery    a config source; detail: the discovery service it asks
# bound        sizes memory, CPU or connections; its bounds are in bounds.go
# forbidden    refused whatever its value; detail: why, as refusals say it
#
# A note says why: "reviewed: ..." for a class chosen or checked by hand,
# "rule: ..." for one that a rule of the generator (proposeClass in
# fields_test.go) proposed and that was accepted as it is. TestFieldsAreAllClassified fails on a field this table
# lacks and on an entry that is no field; with -update it rewrites the
# table, proposing a class for each field it lacks, marked "proposed" until
# reviewed.
`
