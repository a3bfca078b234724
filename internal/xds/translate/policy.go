package translate

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// The content policy: what an EnvoyConfig may have the proxies of its fleet
// read, write and reach.
//
// A proxy runs in a pod with credentials that whoever writes its fleet's
// EnvoyConfigs does not have: the files of the pod (its ServiceAccount
// token, and in a sidecar every volume of the application's pod that Envoy
// mounts), the fleet's xDS client certificate (which reads the fleet's
// secrets from the operator), its environment, its loopback interface (its
// admin port; in a sidecar, the application's private ports) and its node's
// link-local services (the cloud metadata service, which hands out the
// node's or, with workload identity, the pod's cloud credentials). An
// EnvoyConfig author may configure what a pod of their own could do:
// listen, and send traffic to Services, pods and the Internet. They may not
// have the proxy act with what only its pod has. So the policy refuses:
//
//   - Files. A DataSource that names a file, a watched directory, a config
//     source read from a file, an access log, health check event log or TLS
//     key log written to a file, a Unix socket, a network namespace, a
//     tracer's library or token file: any field that makes the proxy read,
//     write or open a path (the file fields of the classification table,
//     fields.txt). A cluster administrator may allow files (Policy.Files);
//     never the fleet's xDS client certificate, which would let a cluster
//     present the fleet's identity. Access logs may always go to
//     /dev/stdout and /dev/stderr: the container's log, which whoever may
//     read the pod's logs reads anyway; a TLS key log never does, since it
//     holds the keys that decrypt the connections it logs.
//     Secrets come from Kubernetes Secrets, through spec.tlsSecrets.
//   - Environment variables, unless allowed (Policy.Env), through every
//     door Envoy has to them (the table's environment fields): a DataSource's
//     environment_variable, a tracing custom tag's environment, and the
//     substitution formatter's %ENVIRONMENT(NAME)% in any string (header
//     values to add, access log formats, local replies' body formats...).
//   - Configuration from anywhere but this server: a config source must be
//     ads or self, never a file, whatever Policy.Files allows: what a file
//     holds never passes this check, and an EnvoyConfig may write the files
//     that Policy.Files allows (an access log), so one resource could write
//     the configuration that another loads (naming any path, any variable,
//     any destination). A tracer's library is never loaded either. No
//     entry of Policy.Files may cover the files the proxy loads its own
//     configuration from (its bootstrap and SDS files, below
//     proxy.BootstrapDir), which such a write would replace. Resources
//     from another server, or
//     an extension whose type is named only by a string (TypedStruct,
//     Struct), would never pass this check; neither would a gRPC service
//     with its own credentials and target (google_grpc).
//   - Destinations the proxy reaches from where it runs. An address of a
//     cluster or of its endpoints, or one that another resource names
//     (destinationFields: a tracer's daemon or collector, a stats sink, a
//     DNS resolver, a tunnel's target), may not be link-local (169.254.0.0/16,
//     fe80::/10: the addresses Kubernetes refuses in an EndpointSlice, the
//     cloud metadata services among them), a cloud metadata service or host
//     agent that is not link-local, by its address or its name
//     (metadataServices), or the proxy's admin port on loopback or at any host name (any
//     name may resolve to loopback). Other loopback ports stay open: a
//     sidecar serves the application on localhost. No name may lie
//     in the operator's namespace (its xDS, webhook and metrics Services,
//     and its pods, in any DNS form: <name>.<namespace>[.svc[.<domain>]],
//     <pod>.<namespace>.pod...), or be one of the operator's other names
//     (Policy.Hosts). A host name is judged by what it says, not by what it
//     resolves to.
//   - Destinations a request chooses: a route's cluster_header and cluster
//     specifier plugins, and ORIGINAL_DST or custom cluster types (whose
//     destination the client's connection, a PROXY protocol header or a
//     request header sets). They could reach the bootstrap's own clusters,
//     whose names no EnvoyConfig may use either: the cluster to the xDS
//     server, which carries the fleet's certificate, and the one to the
//     admin interface.
//
//   - Whatever nobody classified. An Any may hold only an admitted
//     extension, and every field an EnvoyConfig sets has a class in the
//     classification table (fields.go, fields.txt): a field the table
//     lacks is refused, and so is a forbidden one (discovery the server
//     does not serve, requests that choose their cluster, google_grpc,
//     socket options); bounded fields stay within their bounds (bounds.go).
//
// Admission refuses such content (Admit), naming the resource and the
// field, and translation never serves it (Translate, Render): an
// EnvoyConfig that holds any is served none of its content, and a revision
// recorded before holds none of it either.

// Policy is what EnvoyConfigs may have their proxies read, write and reach
// beyond what every EnvoyConfig may. Its zero value allows no file and no
// environment variable, and knows no name of the operator's.
type Policy struct {
	// Files are the absolute paths that EnvoyConfigs may name: a file, or,
	// ending in "/", every path below a directory. None by default.
	Files []string `json:"files,omitempty"`
	// Env are the environment variables that EnvoyConfigs may name: in
	// DataSources, tracing custom tags and format strings.
	Env []string `json:"env,omitempty"`
	// Namespace is the operator's namespace: no destination may be a name
	// in it.
	Namespace string `json:"namespace,omitempty"`
	// Hosts are other names of the operator's endpoints (the xDS Service's
	// address as fleets reach it, the webhook's DNS name): no destination
	// may be one of them.
	Hosts []string `json:"hosts,omitempty"`
	// Allowed, when set, is the fleet's allowlist (its Envoy's
	// spec.egress.allowed; see ForFleet): every destination must be in it.
	Allowed *examplev1.EnvoyEgressAllowlist `json:"allowed,omitempty"`
	// Bounds are the floors and ceilings of the bounded fields, and of a
	// fleet's resources of each kind, that differ from the defaults
	// (defaultBounds, bounds.go).
	Bounds Bounds `json:"bounds,omitempty"`
}

// FilesFlag and EnvFlag are the operator's flags that fill Policy.Files and
// Policy.Env; refusals name them.
const (
	FilesFlag = "--envoyconfig-allowed-files"
	EnvFlag   = "--envoyconfig-allowed-env"
)

// neverAllowed are the files no policy allows: the fleet's xDS client
// certificate, as mounted (every file below proxy.ClientCertDir) and as the
// bootstrap's SDS file delivers it.
var neverAllowed = []string{proxy.ClientCertDir + "/", path.Join(proxy.BootstrapDir, proxy.ClientCertSDSFile)}

// aliasDirs hold paths that lead to any other file (/proc/self/root/...,
// /dev/fd/N): no allowed entry may be below them.
var aliasDirs = []string{"/proc/", "/dev/fd/", "/sys/"}

// configDirs hold the files from which the proxy loads its own
// configuration: its bootstrap, and the SDS files it watches. No allowed
// entry may cover them: an EnvoyConfig may write what is allowed.
var configDirs = []string{proxy.BootstrapDir + "/"}

// consoles are the files an access log (any field that writes, but a TLS
// key log) may always write: the container's log.
var consoles = []string{"/dev/stdout", "/dev/stderr"}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Check reports entries of p that cannot be meant: a file that is not an
// absolute, clean path, the whole file system, a path below /proc, /dev/fd
// or /sys (which reach every other file), the fleet's xDS client
// certificate, and environment variables that are not names.
func (p Policy) Check() error {
	var errs []error
	for _, f := range p.Files {
		dir := strings.TrimSuffix(f, "/")
		switch {
		case f == "/":
			errs = append(errs, fmt.Errorf("%s: %q allows every file", FilesFlag, f))
		case !path.IsAbs(f) || path.Clean(dir) != dir:
			errs = append(errs, fmt.Errorf("%s: %q is not an absolute, clean path (a directory ends in /)", FilesFlag, f))
		case below(dir+"/", aliasDirs):
			errs = append(errs, fmt.Errorf("%s: %q is below /proc, /dev/fd or /sys, whose paths lead to every other file", FilesFlag, f))
		case below(dir, neverAllowed) || below(dir+"/", neverAllowed) || slices.ContainsFunc(neverAllowed, func(n string) bool { return strings.HasPrefix(n, dir+"/") }):
			errs = append(errs, fmt.Errorf("%s: %q holds the fleet's xDS client certificate, which no EnvoyConfig may use", FilesFlag, f))
		case below(dir+"/", configDirs) || slices.ContainsFunc(configDirs, func(c string) bool { return strings.HasPrefix(c, dir+"/") }):
			errs = append(errs, fmt.Errorf("%s: %q is or holds a file from which the proxy loads its own configuration (%s: its bootstrap and SDS files); "+
				"an EnvoyConfig may write what this flag allows (an access log), and would configure the proxy past the content policy", FilesFlag, f, proxy.BootstrapDir))
		}
	}
	for _, e := range p.Env {
		if !envName.MatchString(e) {
			errs = append(errs, fmt.Errorf("%s: %q is not an environment variable's name", EnvFlag, e))
		}
	}
	return errors.Join(errs...)
}

// below reports whether p is one of entries, or below one that ends in "/".
func below(p string, entries []string) bool {
	for _, e := range entries {
		if p == e || strings.HasSuffix(e, "/") && strings.HasPrefix(p, e) {
			return true
		}
	}
	return false
}

// fileUse is what a field makes the proxy do with the path it names.
type fileUse string

const (
	reads   fileUse = "read"
	writes  fileUse = "write"
	watches fileUse = "watch"
	opens   fileUse = "open"
	loads   fileUse = "load"
	// writesKeys: the proxy writes TLS session keys to the file, which
	// decrypt the connections; never to the container's log (consoles).
	writesKeys fileUse = "write keys to"
	// configures: the proxy loads configuration from the file. Never
	// allowed: see neverLoaded.
	configures fileUse = "load configuration from"
)

// neverLoaded are the uses that no entry of Policy.Files allows: what the
// proxy would load from the file (configuration, a library's code) never
// passes this check, and an EnvoyConfig may write the files the policy
// allows, so that one resource could write what another loads.
var neverLoaded = []fileUse{configures, loads}

// fileUses are the uses a file field of the classification table
// (fields.txt) may name.
var fileUses = []fileUse{reads, writes, writesKeys, watches, opens, loads, configures}

// file returns why the proxy may not use the file at p, or nil.
func (pol Policy) file(p string, use fileUse) error {
	if clean := path.Clean(p); path.IsAbs(p) && below(clean, neverAllowed) {
		return fmt.Errorf("names %q, the fleet's xDS client certificate, which no EnvoyConfig may use", p)
	}
	if slices.Contains(consoles, p) {
		switch use {
		case writes:
			return nil
		case writesKeys:
			return fmt.Errorf("names %q, the container's log, which whoever may read the pod's logs reads: a TLS key log holds the keys "+
				"that decrypt every connection it logs; write it to a file that %s allows", p, FilesFlag)
		}
	}
	if slices.Contains(neverLoaded, use) {
		return fmt.Errorf("names %q, which the proxy would %s: never allowed, whatever %s allows, since what it loads never passes the content policy "+
			"and an EnvoyConfig may write the files that flag allows (an access log); take configuration over ads: {}", p, use, FilesFlag)
	}
	switch {
	case strings.HasPrefix(p, "@"):
		return fmt.Errorf("names the abstract Unix socket %q, in the pod's network namespace, which an EnvoyConfig may not use", p)
	case !path.IsAbs(p) || path.Clean(p) != p:
		return fmt.Errorf("names %q, which is not an absolute, clean path: the proxy may %s only the files that %s allows", p, use, FilesFlag)
	case below(p, pol.Files):
		return nil
	}
	allowed := "none"
	if len(pol.Files) > 0 {
		allowed = strings.Join(pol.Files, ", ")
	}
	return fmt.Errorf("names the file %q, which the proxy may not %s: an EnvoyConfig may name only the files that %s allows (%s); "+
		"serve certificates and keys from a kubernetes.io/tls Secret named in spec.tlsSecrets", p, use, FilesFlag, allowed)
}

// env returns why a DataSource may not name the environment variable name, or nil.
func (pol Policy) env(name string) error {
	if slices.Contains(pol.Env, name) {
		return nil
	}
	return fmt.Errorf("names the environment variable %q, which an EnvoyConfig may not read: only those that %s allows", name, EnvFlag)
}

// The fields that name an environment variable of the proxy are the
// table's environment fields (fields.txt), judged by Policy.Env. Envoy's
// substitution formatter reads one too, as %ENVIRONMENT(NAME)% in a format
// string: every string of a resource is judged for it (formattedEnv),
// wherever Envoy formats it.

// formattedEnv returns the environment variables that the substitution
// formatter's %ENVIRONMENT(NAME)% (with or without a length, :N) would read
// in s. Envoy's commands are upper case; any case is taken here, and an
// unclosed name runs to the end of s.
func formattedEnv(s string) []string {
	const command = "%ENVIRONMENT("
	var out []string
	upper := strings.ToUpper(s)
	for {
		i := strings.Index(upper, command)
		if i < 0 {
			return out
		}
		s, upper = s[i+len(command):], upper[i+len(command):]
		name := s
		if j := strings.IndexByte(s, ')'); j >= 0 {
			name = s[:j]
		}
		out = append(out, name)
	}
}

// formatEnv refuses the environment variables that m's strings and bytes
// (lists and maps of them too) would have the substitution formatter read.
func (c checker) formatEnv(m protoreflect.Message, at string) {
	judge := func(fd protoreflect.FieldDescriptor, kind protoreflect.Kind, v protoreflect.Value) {
		var s string
		switch kind {
		case protoreflect.StringKind:
			s = v.String()
		case protoreflect.BytesKind:
			s = string(v.Bytes())
		default:
			return
		}
		for _, name := range formattedEnv(s) {
			if err := c.pol.env(name); err != nil {
				c.refuse(field(at, string(fd.Name())), fmt.Errorf("through the substitution formatter's %%ENVIRONMENT(%s)%%: %w", name, err))
			}
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			for i := range v.List().Len() {
				judge(fd, fd.Kind(), v.List().Get(i))
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				judge(fd, fd.MapValue().Kind(), mv)
				return true
			})
		default:
			judge(fd, fd.Kind(), v)
		}
		return true
	})
}

// reservedClusters are the names of the bootstrap's static clusters: the
// xDS server's, whose connection carries the fleet's client certificate,
// and the admin interface's. Envoy keeps a static cluster when a dynamic
// one of its name arrives, so a route to a cluster of that name would reach
// the bootstrap's.
var reservedClusters = func() []string {
	var out []string
	for _, c := range proxy.Bootstrap(proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "localhost", Port: 1, MutualTLS: true}, proxy.Overload{}).GetStaticResources().GetClusters() {
		out = append(out, c.GetName())
	}
	return out
}()

// refusals returns a message for everything in rs, the valid resources of
// the EnvoyConfig named name (namespace/name), that pol refuses, naming
// the resource and the field.
func (pol Policy) refusals(name string, rs []resource.Resource) []string {
	ns, _, _ := strings.Cut(name, "/")
	inOperatorNamespace := ns == pol.Namespace
	identity := pol.identity()
	var out []string
	for _, r := range rs {
		if r.Message == nil {
			continue
		}
		for _, msg := range checked.get(verdictKey{msg: r.Message, typeURL: r.Kind.TypeURL, policy: identity, operatorNamespace: inOperatorNamespace}, func() []string {
			return pol.check(r, ns)
		}) {
			out = append(out, fmt.Sprintf("%s (%q): %s", r.Path, r.Name, msg))
		}
	}
	return out
}

// check returns what pol refuses in r, an EnvoyConfig's resource in
// namespace ns, each as the field and why.
func (pol Policy) check(r resource.Resource, ns string) []string {
	var out []string
	c := checker{pol: pol, namespace: ns, destinations: r.Kind.Destinations,
		refused: map[string]bool{}}
	c.refuse = func(field string, err error) {
		out = append(out, fmt.Sprintf("%s %v", field, err))
	}
	if r.Kind.TypeURL == resourcev3.ClusterType && slices.Contains(reservedClusters, r.Name) {
		c.refuse("name", fmt.Errorf("%q is a cluster of the proxy's bootstrap, which an EnvoyConfig may not define", r.Name))
	}
	walk(r.Message, "", c.visit)
	sort.Strings(out) // walk's order of fields differs between builds
	// A bind config is walked twice, once for the rules of a destination
	// and once without them (visit): what both walks refuse is said once.
	return slices.Compact(out)
}

// identity is a string that differs between policies that judge differently.
func (pol Policy) identity() string {
	return strings.Join(pol.Files, "\x00") + "\x01" + strings.Join(pol.Env, "\x00") + "\x01" + pol.Namespace + "\x01" + strings.Join(pol.Hosts, "\x00") +
		"\x01" + allowlistIdentity(pol.Allowed) + "\x01" + pol.Bounds.String()
}

// refused reports whether pol refuses anything in c's valid resources.
func (pol Policy) refused(c Config) bool {
	p, _ := parse(c)
	return len(pol.refusals(c.Name, p.resources)) > 0
}

// checker applies a policy to one resource.
type checker struct {
	pol       Policy
	namespace string
	// destinations: socket addresses are where the proxy connects to (in a
	// cluster or its endpoints), not where it listens.
	destinations bool
	refuse       func(field string, err error)
	// refused are the paths of the fields refused whole (forbidden, not
	// classified): what they hold is not judged further.
	refused map[string]bool
}

func field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// visit checks one message of a resource, at path.
func (c checker) visit(m proto.Message, at string) bool {
	if c.refused[fieldOf(at)] {
		return false
	}
	if isContentOfAny(m, at) && !isAdmitted(proto.MessageName(m)) {
		switch proto.MessageName(m) {
		case "xds.type.v3.TypedStruct", "udpa.type.v1.TypedStruct", "google.protobuf.Struct":
			c.refuse(at, errors.New("names its extension's type only as a string, which hides the extension from this check: "+
				"write the extension's own type in @type"))
		default:
			c.refuse(at, fmt.Errorf("holds the type %s, which is not an extension the operator serves", proto.MessageName(m)))
		}
		return false
	}
	c.classify(m.ProtoReflect(), at)
	for _, fd := range clusterFieldsOf(m.ProtoReflect().Descriptor()) {
		for _, name := range stringValues(m.ProtoReflect(), fd) {
			if slices.Contains(reservedClusters, name) {
				c.refuse(field(at, string(fd.Name())), fmt.Errorf("names %q, a cluster of the proxy's bootstrap, which an EnvoyConfig may not use", name))
			}
		}
	}
	if _, ok := m.(*corev3.Metadata); ok {
		return false // data for filters to read; Envoy instantiates nothing from it
	}
	c.formatEnv(m.ProtoReflect(), at)
	c.destinationsIn(m.ProtoReflect(), at)
	switch t := m.(type) {
	case *corev3.BindConfig:
		// Where the proxy connects from, not to: only the other rules apply.
		if !c.destinations {
			return true
		}
		inner := c
		inner.destinations = false
		walk(t, at, inner.visit)
		return false
	case *corev3.SocketAddress:
		if c.destinations {
			if err := c.destination(t.GetAddress(), t.GetPortValue()); err != nil {
				c.refuse(field(at, "address"), err)
			}
		}
	case *endpointv3.LbEndpoint:
		c.healthCheckPort(t, at)
	case *clusterv3.Cluster:
		if t.GetType() == clusterv3.Cluster_ORIGINAL_DST {
			c.refuse(field(at, "type"), errors.New("is ORIGINAL_DST, whose destination the client's connection, a PROXY protocol header or a request header sets"))
		}
	}
	return true
}

// healthCheckPort checks an endpoint's addresses at the port its health
// checks use, when that port is not the address's own.
func (c checker) healthCheckPort(ep *endpointv3.LbEndpoint, at string) {
	hc := ep.GetEndpoint().GetHealthCheckConfig()
	if !c.destinations || hc.GetPortValue() == 0 {
		return
	}
	addrs := []*corev3.Address{ep.GetEndpoint().GetAddress()}
	for _, a := range ep.GetEndpoint().GetAdditionalAddresses() {
		addrs = append(addrs, a.GetAddress())
	}
	if hc.GetAddress() != nil {
		addrs = []*corev3.Address{hc.GetAddress()}
	}
	for _, a := range addrs {
		if sa := a.GetSocketAddress(); sa != nil {
			if err := c.destination(sa.GetAddress(), hc.GetPortValue()); err != nil {
				c.refuse(field(at, "endpoint.health_check_config.port_value"), err)
			}
		}
	}
}

// fieldOf returns the path of the field that holds the message at path at:
// at without the type of an Any's content and the index or key of an
// element.
func fieldOf(at string) string {
	for {
		switch {
		case strings.HasSuffix(at, ")") && strings.LastIndexByte(at, '(') >= 0:
			at = at[:strings.LastIndexByte(at, '(')]
		case strings.HasSuffix(at, "]") && strings.LastIndexByte(at, '[') >= 0:
			at = at[:strings.LastIndexByte(at, '[')]
		default:
			return at
		}
	}
}

// isContentOfAny reports whether m, at path, is what an Any holds: walk
// names it "(Type)" after the Any's field.
func isContentOfAny(m proto.Message, at string) bool {
	return strings.HasSuffix(at, "("+string(proto.MessageName(m).Name())+")")
}

// Per message type, its fields that name clusters.
var clusterFieldsByType sync.Map // protoreflect.FullName -> []protoreflect.FieldDescriptor

// clusterFieldsOf returns md's string fields that name a cluster: those
// called cluster, cluster_name, cluster_names, or ending in _cluster or
// _cluster_name (a tracer's collector_cluster, say), and a weighted
// cluster's name.
func clusterFieldsOf(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if v, ok := clusterFieldsByType.Load(md.FullName()); ok {
		return v.([]protoreflect.FieldDescriptor)
	}
	var out []protoreflect.FieldDescriptor
	fs := md.Fields()
	for i := range fs.Len() {
		fd := fs.Get(i)
		if fd.Kind() == protoreflect.StringKind && namesCluster(md, fd) {
			out = append(out, fd)
		}
	}
	clusterFieldsByType.Store(md.FullName(), out)
	return out
}

func namesCluster(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor) bool {
	n := string(fd.Name())
	switch {
	case n == "cluster" || n == "cluster_name" || n == "cluster_names" || strings.HasSuffix(n, "_cluster") || strings.HasSuffix(n, "_cluster_name"):
		return true
	case n == "name" && md.Name() == "ClusterWeight":
		return true // route and TCP proxy weighted clusters
	}
	return false
}

func stringValues(m protoreflect.Message, fd protoreflect.FieldDescriptor) []string {
	if !m.Has(fd) {
		return nil
	}
	if fd.IsList() {
		l := m.Get(fd).List()
		out := make([]string, l.Len())
		for i := range l.Len() {
			out[i] = l.Get(i).String()
		}
		return out
	}
	return []string{m.Get(fd).String()}
}
