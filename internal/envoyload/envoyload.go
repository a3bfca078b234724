// Package envoyload has a real Envoy load a fleet's resources, as it would
// be served them: Bootstrap puts them into the fleet's bootstrap as static
// resources, and Validate runs `envoy --mode validate` on it, which builds
// every static resource as Envoy builds what comes over xDS, opening no
// port and no connection. The operator judges EnvoyConfigs with it (Judge),
// at admission and before the leader records a revision; kubectl envoy
// validate --envoy and diff --envoy use it, and so do the tests that check
// admission against Envoy.
package envoyload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// Resources are xDS resources for one Envoy to load, each in JSON with
// Envoy's field names, by the list of an EnvoyConfig's spec.resources they
// would be in (resource.Kind.Field).
//
// `envoy --mode validate` builds only static resources: a resource served
// over xDS is never loaded there. So Bootstrap puts them in the fleet's
// bootstrap (proxy.Bootstrap: its admin interface, its own listener and
// clusters, ADS) as static resources, each built as Envoy builds it when
// it comes over xDS: where and how is its kind's (resource.Kind.Static and
// AsStatic), e.g. a route configuration inline in the connection manager
// of a listener of its own, a cluster load assignment as the endpoints of a
// STATIC cluster of its own.
//
// A reference to a route configuration, a cluster's endpoints or a secret
// over ADS is accepted as it is: validate mode subscribes to nothing. But a
// static cluster's secrets over ADS are taken over gRPC from the xDS
// cluster instead (see sdsOverGRPC).
// Names of the resources Bootstrap adds start with "envoyload/".
type Resources struct {
	lists map[string][]json.RawMessage
}

// kinds are the kinds of resources Envoy loads: resource.Kinds (a test
// adds one).
var kinds = resource.Kinds[:]

// kindNamed returns the kind whose list is field.
func kindNamed(field string) (resource.Kind, bool) {
	for _, k := range kinds {
		if k.Field == field {
			return k, true
		}
	}
	return resource.Kind{}, false
}

// List returns r's resources of the list field (listeners, routes,
// clusters, endpoints or secrets).
func (r Resources) List(field string) []json.RawMessage { return r.lists[field] }

// Add adds raw, a resource in YAML or JSON, to the list field (listeners,
// routes, clusters, endpoints or secrets).
func (r *Resources) Add(field string, raw []byte) error {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return r.add(field, js)
}

func (r *Resources) add(field string, js json.RawMessage) error {
	if _, ok := kindNamed(field); !ok {
		return fmt.Errorf("no list of resources is named %q", field)
	}
	if r.lists == nil {
		r.lists = map[string][]json.RawMessage{}
	}
	r.lists[field] = append(r.lists[field], js)
	return nil
}

// AddMessage adds m, a resource of one of the kinds an EnvoyConfig holds
// (a listener, route configuration, cluster, cluster load assignment or
// secret).
func (r *Resources) AddMessage(m proto.Message) error {
	typeURL := "type.googleapis.com/" + string(proto.MessageName(m))
	field := ""
	for _, k := range kinds {
		if k.TypeURL == typeURL {
			field = k.Field
		}
	}
	if field == "" {
		return fmt.Errorf("%s is not a resource an EnvoyConfig holds", proto.MessageName(m))
	}
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	return r.Add(field, js)
}

// decode decodes one resource in JSON, keeping its numbers as they are.
func decode(raw json.RawMessage) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", raw, err)
	}
	return m, nil
}

// staticClusters is where a bootstrap holds its static clusters.
const staticClusters = "static_resources.clusters"

// Bootstrap returns the fleet's bootstrap holding r, in JSON (which Envoy
// reads as YAML).
func (r Resources) Bootstrap() ([]byte, error) {
	b := proxy.Bootstrap(proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "xds.invalid", Port: 1}, proxy.Overload{})
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return nil, err
	}
	var boot map[string]any
	if err := json.Unmarshal(js, &boot); err != nil {
		return nil, err
	}
	// add appends v to the list at path (a.b.c) of boot.
	add := func(path string, v any) {
		at := boot
		parts := strings.Split(path, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := at[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				at[p] = next
			}
			at = next
		}
		last := parts[len(parts)-1]
		l, _ := at[last].([]any)
		at[last] = append(l, v)
	}
	for _, k := range kinds {
		for i, raw := range r.lists[k.Field] {
			res, err := decode(raw)
			if err != nil {
				return nil, err
			}
			if k.AsStatic != nil {
				res = k.AsStatic(res, i)
			}
			if k.Static == staticClusters {
				sdsOverGRPC(res)
			}
			add(k.Static, res)
		}
	}
	return json.Marshal(boot)
}

// hcmType is the type URL of the HTTP connection manager.
const hcmType = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// inlineRoutesUnvalidated sets validate_clusters false in every route
// configuration inline in a connection manager within v that does not set
// it (see FromSpec).
func inlineRoutesUnvalidated(v any) {
	switch v := v.(type) {
	case map[string]any:
		if rc, ok := v["route_config"].(map[string]any); ok && v["@type"] == hcmType {
			if _, set := rc["validate_clusters"]; !set {
				rc["validate_clusters"] = false
			}
		}
		for _, c := range v {
			inlineRoutesUnvalidated(c)
		}
	case []any:
		for _, c := range v {
			inlineRoutesUnvalidated(c)
		}
	}
}

// sdsOverGRPC returns v, a cluster or a part of it, with every SDS config
// source that is ADS made a gRPC one to the xDS cluster. Envoy builds a
// static cluster before its ADS stream, and crashes (SIGSEGV, in validate
// mode too) on one whose TLS takes a secret over ADS; over CDS, the stream
// is there. Validate mode contacts neither.
func sdsOverGRPC(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if sds, ok := c.(map[string]any); ok && k == "sds_config" && sds["ads"] != nil {
				delete(sds, "ads")
				sds["api_config_source"] = map[string]any{"api_type": "GRPC", "transport_api_version": "V3",
					"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": fleet.XDSClusterName}}}}
				continue
			}
			v[k] = sdsOverGRPC(c)
		}
	case []any:
		for i, c := range v {
			v[i] = sdsOverGRPC(c)
		}
	}
	return v
}

// ErrRefused is what Validate returns, wrapped with Envoy's message, when
// Envoy refuses what it loads.
var ErrRefused = errors.New("envoy refused the configuration")

// Validate has the Envoy at envoy load r's Bootstrap, written to dir in
// protobuf's binary form, in which Envoy reads an xDS response: each Any
// (a typed_config) is parsed on its own, within protobuf's limit on
// nesting, as it is when it comes over xDS. It returns nil when Envoy loads
// it, ErrRefused with Envoy's message when it refuses it, and another error
// when Envoy could not run.
func Validate(ctx context.Context, envoy, dir string, r Resources) error {
	js, err := r.Bootstrap()
	if err != nil {
		return err
	}
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, b); err != nil {
		return fmt.Errorf("the bootstrap holding the resources: %w", err)
	}
	pb, err := proto.MarshalOptions{Deterministic: true}.Marshal(b)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "envoy.pb")
	if err := os.WriteFile(path, pb, 0o600); err != nil {
		return err
	}
	return ValidateArgs(ctx, envoy, dir, "-c", path,
		"--service-node", "validate", "--service-cluster", "validate", "--log-level", "critical", "--disable-hot-restart")
}

// ValidateArgs runs the Envoy at envoy with args in `--mode validate`, in
// dir, and answers as Validate does.
func ValidateArgs(ctx context.Context, envoy, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, envoy, append([]string{"--mode", "validate", "--log-format", "%v"}, args...)...)
	cmd.Dir = dir
	// Killed at ctx's end, an Envoy (or what runs in its place) may leave
	// children holding its output open: its output is not waited for long.
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return fmt.Errorf("%w: %s", ErrRefused, strings.TrimSpace(string(out)))
	}
	return fmt.Errorf("%s --mode validate: %w: %s", envoy, err, out)
}

// debugMarker is what Envoy's protobuf library puts, at random, into the
// text of a message it prints, so that nobody matches it.
var debugMarker = regexp.MustCompile(`goo\.gle/debug[a-z]*`)

// Said returns what Envoy said in err, Validate's error, with the markers
// its protobuf library puts into printed messages removed and every run of
// white space made one space: the words to compare with a recorded message.
func Said(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(debugMarker.ReplaceAllString(err.Error(), " ")), " ")
}

// FromSpec returns an EnvoyConfig's resources (spec.resources), as an Envoy
// would load them, alone: the load assignments of its serviceEndpoints and
// the secrets of its tlsSecrets come from the cluster and are not among
// them, and a reference to one of them (over ADS) is accepted as it is.
//
// The fleet's other EnvoyConfigs are not loaded beside them: a route
// configuration inline in a listener's connection manager that does not
// say whether its clusters are validated is loaded without validating them,
// as RDS loads one (Bootstrap), since its clusters may be another
// EnvoyConfig's (admission's rules check that every reference leads
// somewhere in the fleet).
//
// A listener with an api_listener is for proxyless gRPC clients, which take
// it; Envoy has no such extension, and refuses it. Its connection manager
// is what such a client builds, so it is loaded as the one filter of a
// listener of its own that binds no port, as a route configuration is.
func FromSpec(res examplev1.EnvoyResources) (Resources, error) {
	var r Resources
	for _, k := range kinds {
		if k.List == nil {
			continue
		}
		for i, item := range *k.List(&res) {
			js, err := yaml.YAMLToJSON(item.Raw)
			if err == nil {
				js, err = alone(js, i)
			}
			if err == nil {
				err = r.add(k.Field, js)
			}
			if err != nil {
				return Resources{}, fmt.Errorf("spec.resources.%s[%d]: %w", k.Field, i, err)
			}
		}
	}
	return r, nil
}

// alone returns js, the i-th resource of its list, as it is loaded alone
// (FromSpec): every route configuration inline in a connection manager
// within it that does not say whether its clusters are validated made not
// to validate them, and an API listener's connection manager made the
// filter of the listener.
func alone(js json.RawMessage, i int) (json.RawMessage, error) {
	res, err := decode(js)
	if err != nil {
		return nil, err
	}
	if api, ok := res["api_listener"].(map[string]any); ok {
		delete(res, "api_listener")
		res["address"] = map[string]any{"pipe": map[string]any{"path": fmt.Sprintf("@envoyload-api-listeners-%d", i)}}
		res["bind_to_port"] = false
		res["filter_chains"] = []any{map[string]any{"filters": []any{map[string]any{
			"name": "envoy.filters.network.http_connection_manager", "typed_config": api["api_listener"]}}}}
	}
	inlineRoutesUnvalidated(res)
	return json.Marshal(res)
}

// ClusterNames returns the names of the clusters among an EnvoyConfig's
// resources (spec.resources.clusters); a cluster that does not decode has
// none.
func ClusterNames(res examplev1.EnvoyResources) []string {
	var out []string
	for _, item := range res.Clusters {
		var c struct {
			Name string `json:"name"`
		}
		// The API server stores JSON; a manifest's may be YAML.
		if json.Unmarshal(item.Raw, &c) != nil {
			if js, err := yaml.YAMLToJSON(item.Raw); err == nil {
				_ = json.Unmarshal(js, &c)
			}
		}
		if c.Name != "" {
			out = append(out, c.Name)
		}
	}
	return out
}

// WithClusters returns r with a stand-in cluster of each of names that r
// names (a string of r's, anywhere, is the name) and does not define: the
// clusters of the fleet's other EnvoyConfigs that r may refer to. Envoy
// checks, as it loads some resources, that a cluster they name exists (a
// tracer's collector, an inline route configuration's clusters when it
// validates them); loaded alone, r would be refused for a cluster the fleet
// has. A stand-in is STATIC, without endpoints, and speaks HTTP/2, so that
// what needs a gRPC cluster loads: what the cluster itself is, is judged
// with its own EnvoyConfig.
func (r Resources) WithClusters(names []string) Resources {
	defined := map[string]bool{}
	var text strings.Builder
	for _, k := range kinds {
		for _, raw := range r.lists[k.Field] {
			text.Write(raw)
		}
	}
	for _, raw := range r.lists[clustersField] {
		var c struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &c) == nil {
			defined[c.Name] = true
		}
	}
	all := text.String()
	clusters := slices.Clone(r.lists[clustersField])
	for _, name := range names {
		quoted, _ := json.Marshal(name)
		if defined[name] || !strings.Contains(all, string(quoted)) {
			continue
		}
		defined[name] = true
		stub, _ := json.Marshal(map[string]any{"name": name, "type": "STATIC", "connect_timeout": "1s",
			"typed_extension_protocol_options": map[string]any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
				"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
				"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}}}}})
		clusters = append(clusters, stub)
	}
	r.lists = maps.Clone(r.lists)
	if r.lists == nil {
		r.lists = map[string][]json.RawMessage{}
	}
	r.lists[clustersField] = clusters
	return r
}

// clustersField is the list of the clusters.
var clustersField = resource.KindOf(resourcev3.ClusterType).Field

var versionRE = regexp.MustCompile(`version: [0-9a-f]+/(\d+\.\d+\.\d+)/`)

// Version is the release of the Envoy at path, from its --version; an error
// when it does not run or is not an Envoy.
func Version(ctx context.Context, path string) (string, error) {
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	if m := versionRE.FindSubmatch(out); m != nil {
		return string(m[1]), nil
	}
	return "", fmt.Errorf("%s is not an Envoy: its --version says %q", path, strings.TrimSpace(string(out)))
}

// Digest is a hash of r's content, every list in its order: the same
// content, the same digest.
func (r Resources) Digest() string {
	h := sha256.New()
	for _, k := range kinds {
		list := raw(r.lists[k.Field])
		fmt.Fprintf(h, "%d;", len(list))
		for _, b := range list {
			fmt.Fprintf(h, "%d:", len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func raw[T ~[]byte](l []T) [][]byte {
	out := make([][]byte, len(l))
	for i, b := range l {
		out[i] = b
	}
	return out
}

// Words returns what Envoy said in err, Validate's error (Said), without
// the name of the file it loaded, which was temporary.
func Words(err error) string {
	said := Said(err)
	if _, after, ok := strings.Cut(said, "envoy.pb': "); ok {
		said = after
	}
	return said
}
