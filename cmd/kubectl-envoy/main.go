// Command kubectl-envoy is a kubectl plugin for kube-envoy-controller:
// which configuration every proxy runs and whether it accepted it
// (proxy-status), what a fleet is served (config-dump), whether
// EnvoyConfig files would be admitted (validate, offline), what applying
// them would change in what each fleet is served (diff), and the versions
// of the plugin and the operator's replicas (version).
//
// Install it with `go install ./cmd/kubectl-envoy` (or `make build`, which
// puts it in bin/); kubectl finds it on PATH as `kubectl envoy`.
package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/clientset/versioned"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/version"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	code, err := exitStatus(newRootCommand(streams).Execute())
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	os.Exit(code)
}

// exitStatus is the exit code a command's error ends the plugin with, and
// what to say, if anything: 1 and the error, unless the command chose
// (exitCodeError).
func exitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var e *exitCodeError
	if errors.As(err, &e) {
		return e.code, e.err
	}
	return 1, err
}

// options are the flags every command shares.
type options struct {
	config            *genericclioptions.ConfigFlags
	allNamespaces     bool
	output            string
	operatorNamespace string
	operatorAddresses []string
	timeout           time.Duration
	streams           genericiooptions.IOStreams
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:           "kubectl-envoy",
		Short:         "See and check what kube-envoy-controller's proxies run",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl envoy"},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	fs := root.PersistentFlags()
	o.config.AddFlags(fs)
	fs.StringVar(&o.operatorNamespace, "operator-namespace", defaultOperatorNamespace, "Namespace of the operator's pods, and of its published CA certificates.")
	fs.StringArrayVar(&o.operatorAddresses, "operator-address", nil,
		"host:port of a replica's debug endpoint, reached directly instead of through port forwarding to the operator's pods; repeatable. "+
			"Without it, when the operator has no pod, the loopback addresses that an operator run on this host records in Leases of its namespace are used.")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "How long to wait for the operator's replicas.")
	root.AddCommand(o.proxyStatusCommand(), o.configDumpCommand(), o.validateCommand(), o.diffCommand(), o.rolloutCommand(), o.versionCommand())
	return root
}

// namespace is -n, or the kubeconfig context's namespace.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// connect reaches the operator's replicas.
func (o *options) connect(ctx context.Context) ([]connection, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	if imp := cfg.Impersonate; imp.UserName != "" || imp.UID != "" || len(imp.Groups) > 0 || len(imp.Extra) > 0 {
		// The debug endpoint authenticates the caller itself and does not
		// act for anyone else: the rows would be the caller's, not the
		// impersonated user's.
		return nil, fmt.Errorf("--as, --as-group, --as-uid and --as-user-extra are not supported: the operator's debug endpoint does not impersonate")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	e := &endpoint{config: cfg, clientset: cs, namespace: o.operatorNamespace, addresses: o.operatorAddresses, stderr: o.streams.ErrOut}
	return e.connect(ctx)
}

func closeAll(cs []connection) {
	for _, c := range cs {
		c.close()
	}
}

func (o *options) proxyStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy-status [fleet | gateway/NAME | httproute/NAME | grpcroute/NAME]",
		Short: "Every proxy of every fleet, from every replica: versions sent and acked per type, SYNCED, STALE or NACKED",
		Long: `Lists the proxies connected to every replica of the operator, in the namespace (-n),
every namespace (-A), or of one fleet (an Envoy's name). For each type the version
sent and the version acked; SYNCED when the proxy accepted what is served, STALE
when it has not yet, NACKED when it rejected it, with the proxy's reason.
You need get on envoys in the namespace (or on the fleet's Envoy); with -A,
the rows of fleets whose Envoys you may not get are left out.

gateway/NAME lists the proxies of the Gateway's fleet: the Envoy named after it
that it controls. httproute/NAME and grpcroute/NAME list the Gateways the route is
attached to, as the operator recorded them in its status.parents, with its
Accepted condition for each, then the proxies of those Gateways' fleets. You need
get on the Gateway or the route, and on the Gateways and Envoys it leads to.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if !o.allNamespaces || len(args) > 0 {
				ns, err := o.namespace()
				if err != nil {
					return err
				}
				q.Set("namespace", ns)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			if len(args) == 0 {
				rows, err := o.proxies(ctx, q)
				if err != nil {
					return err
				}
				return printRows(o.streams.Out, o.output, rows, time.Now())
			}
			target, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			return o.targetStatus(ctx, q.Get("namespace"), target)
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Proxies of every namespace.")
	cmd.Flags().StringVarP(&o.output, "output", "o", outputTable, "Output format: table, json or yaml.")
	return cmd
}

// targetStatus is proxy-status of one fleet, Gateway or route of namespace
// ns: the fleets that serve it, then their proxies.
func (o *options) targetStatus(ctx context.Context, ns string, target statusTarget) error {
	switch o.output {
	case outputTable, outputJSON, outputYAML, "":
	default:
		return fmt.Errorf("unknown output format %q: want table, json or yaml", o.output)
	}
	atts, envoys, err := o.attachments(ctx, ns, target)
	if err != nil {
		return err
	}
	var fleets []fleet.ID
	if target.kind == kindEnvoy {
		fleets = []fleet.ID{{Namespace: ns, Name: target.name}}
	} else {
		fleets = attachedFleets(atts)
	}
	var rows []debug.ProxyRow
	if len(fleets) > 0 {
		conns, err := o.connect(ctx)
		if err != nil {
			return err
		}
		defer closeAll(conns)
		for _, f := range fleets {
			fr, err := collectProxies(ctx, conns, url.Values{"namespace": {f.Namespace}, "fleet": {f.Name}}, o.streams.ErrOut)
			if err != nil {
				return err
			}
			if len(fr) == 0 {
				fmt.Fprintf(o.streams.ErrOut, "no proxy of fleet %s is connected (spec.replicas: %d, and its sidecars)\n",
					f, ptr.Deref(envoys[f].Spec.Replicas, 1))
			}
			rows = append(rows, fr...)
		}
		sortRows(rows)
	}
	if target.kind == kindEnvoy {
		return printRows(o.streams.Out, o.output, rows, time.Now())
	}
	if o.output == outputJSON || o.output == outputYAML {
		if atts == nil {
			atts = []attachment{}
		}
		return printObject(o.streams.Out, o.output, map[string]any{"attachments": atts, "proxies": rows})
	}
	route := ""
	if target.kind != kindGateway {
		route = target.kind + " " + ns + "/" + target.name
	}
	printAttachments(o.streams.Out, route, atts)
	if len(fleets) == 0 {
		return nil
	}
	return printRows(o.streams.Out, o.output, rows, time.Now())
}

// attachments reads what target, of namespace ns, leads to: for a fleet,
// its Envoy; for a Gateway, its fleet; for a route, the Gateways of its
// status.parents and their fleets. It returns the Envoys read, by fleet. A
// target that does not exist is an error, and so is a Gateway without a
// fleet; a route's parent that cannot be read is a problem of its line.
func (o *options) attachments(ctx context.Context, ns string, target statusTarget) ([]attachment, map[fleet.ID]*examplev1.Envoy, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	ec, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	gc, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	envoys := map[fleet.ID]*examplev1.Envoy{}
	// fleetOf reads the Gateway ns/name and the Envoy it controls.
	fleetOf := func(ns, name string) (fleet.ID, string, error) {
		gw, err := gc.GatewayV1().Gateways(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fleet.ID{}, "", err
		}
		envoy, err := ec.ExampleV1().Envoys(ns).Get(ctx, gateway.FleetName(name), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			envoy = nil
		case err != nil:
			return fleet.ID{}, "", err
		}
		id, problem := gatewayFleet(gw, envoy)
		if problem == "" {
			envoys[id] = envoy
		}
		return id, problem, nil
	}

	var atts []attachment
	switch target.kind {
	case kindEnvoy:
		envoy, err := ec.ExampleV1().Envoys(ns).Get(ctx, target.name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		envoys[fleet.ID{Namespace: ns, Name: target.name}] = envoy
		return nil, envoys, nil
	case kindGateway:
		id, problem, err := fleetOf(ns, target.name)
		if err != nil {
			return nil, nil, err
		}
		if problem != "" {
			return nil, nil, fmt.Errorf("Gateway %s/%s has no fleet: %s", ns, target.name, problem)
		}
		return []attachment{{Gateway: ns + "/" + target.name, Fleet: id.String()}}, envoys, nil
	case kindHTTPRoute:
		rt, err := gc.GatewayV1().HTTPRoutes(ns).Get(ctx, target.name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		atts = routeAttachments(kindHTTPRoute, types.NamespacedName{Namespace: ns, Name: rt.Name}, rt.Status.Parents)
	case kindGRPCRoute:
		rt, err := gc.GatewayV1().GRPCRoutes(ns).Get(ctx, target.name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		atts = routeAttachments(kindGRPCRoute, types.NamespacedName{Namespace: ns, Name: rt.Name}, rt.Status.Parents)
	}
	for i := range atts {
		a := &atts[i]
		gns, gname := splitName(a.Gateway)
		id, problem, err := fleetOf(gns, gname)
		switch {
		case err != nil:
			a.Problem = err.Error()
		case problem != "":
			a.Problem = problem
		default:
			a.Fleet = id.String()
		}
	}
	return atts, envoys, nil
}

// proxies merges the rows of every reachable replica.
func (o *options) proxies(ctx context.Context, q url.Values) ([]debug.ProxyRow, error) {
	conns, err := o.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	return collectProxies(ctx, conns, q, o.streams.ErrOut)
}

// collectProxies asks every connection for its rows and merges them, in
// order; a replica that fails is a warning on stderr, unless every one
// fails.
func collectProxies(ctx context.Context, conns []connection, q url.Values, stderr io.Writer) ([]debug.ProxyRow, error) {
	var (
		rows     []debug.ProxyRow
		answered int
		firstErr error
	)
	for _, c := range conns {
		var l debug.ProxyList
		if err := c.get(ctx, debug.ProxiesPath, q, &l); err != nil {
			fmt.Fprintf(stderr, "warning: replica %s: %v\n", c.replica, err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		answered++
		rows = append(rows, l.Proxies...)
	}
	if answered == 0 {
		return nil, firstErr
	}
	sortRows(rows)
	return rows, nil
}

func (o *options) configDumpCommand() *cobra.Command {
	var typ string
	cmd := &cobra.Command{
		Use:   "config-dump <fleet>",
		Short: "The resources served to a fleet, in Envoy's field names; secrets redacted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if typ != "" {
				if _, err := resource.KindNamed(typ); err != nil {
					return err
				}
			}
			if o.output == outputTable {
				o.output = outputJSON
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			q := url.Values{"fleet": {ns + "/" + args[0]}}
			if typ != "" {
				q.Set("type", typ)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			conns, err := o.connect(ctx)
			if err != nil {
				return err
			}
			defer closeAll(conns)
			// Every replica serves every fleet: the first that answers.
			var errs []string
			for _, c := range conns {
				var d debug.ConfigDump
				if err := c.get(ctx, debug.ConfigPath, q, &d); err != nil {
					errs = append(errs, fmt.Sprintf("replica %s: %v", c.replica, err))
					continue
				}
				return printObject(o.streams.Out, o.output, d)
			}
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "Only this type: listeners, routes, clusters, endpoints or secrets.")
	cmd.Flags().StringVarP(&o.output, "output", "o", outputJSON, "Output format: json or yaml.")
	return cmd
}

func (o *options) validateCommand() *cobra.Command {
	var (
		files     []string
		recursive bool
		pol       translate.Policy
		envoy     string
		bounds    string
	)
	cmd := &cobra.Command{
		Use:   "validate -f <file|dir>",
		Short: "Check EnvoyConfig files offline, as admission would",
		Long: `Checks the EnvoyConfigs in the files given, offline, with the checks of the
operator's admission webhook: strict decoding into Envoy's v3 API, Envoy's
validation rules, no secret material inline, the content policy (no file or
environment variable of the proxy but those --allowed-files and --allowed-env
allow, as the operator's --envoyconfig-allowed-files and --envoyconfig-allowed-env
do; every field classified, no extension the operator does not serve, bounded
fields within --bounds, as the operator's --envoyconfig-bounds; no configuration
from another server; no destination at the proxy's admin
port, a link-local address, a cloud metadata service or the operator's namespace,
--operator-namespace), and references (route configurations, clusters, SDS
secrets) that lead somewhere in each fleet, the fleet being the EnvoyConfigs of
the files with the same namespace and envoyRef. EnvoyConfigs without a namespace
are in -n's (or the kubeconfig context's). Other kinds are skipped. With
--envoy, a local Envoy then loads what each fleet would be served (in
--mode validate: it opens no port and no connection), offline, so without
the endpoints of Services or the Secrets the EnvoyConfigs name. Exits 1 when
something would be refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("-f is required")
			}
			ns, err := o.namespace()
			if err != nil {
				ns = "default"
			}
			docs, err := readManifests(files, recursive, o.streams.In)
			if err != nil {
				return err
			}
			pol.Namespace = o.operatorNamespace
			if err := pol.Check(); err != nil {
				return err
			}
			if pol.Bounds, err = translate.ParseBounds(bounds); err != nil {
				return err
			}
			res := validate(docs, ns, pol)
			if envoy != "" && len(res.problems) == 0 {
				bin, err := envoyBinary(envoy)
				if err != nil {
					return err
				}
				if err := loadInEnvoy(cmd.Context(), bin, pol, &res); err != nil {
					return err
				}
			}
			return reportValidation(o.streams.Out, res)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "A file, a directory of .yaml, .yml and .json files, or - for stdin; repeatable.")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "Read the directories given with -f recursively.")
	cmd.Flags().StringSliceVar(&pol.Files, "allowed-files", nil, "Files the operator allows EnvoyConfigs to name (its --envoyconfig-allowed-files); a directory ends in /.")
	cmd.Flags().StringSliceVar(&pol.Env, "allowed-env", nil, "Environment variables the operator allows EnvoyConfigs to name (its --envoyconfig-allowed-env).")
	cmd.Flags().StringVar(&bounds, "bounds", "", "Bounds of the fields that size the proxy's memory, CPU or connections, as the operator's --envoyconfig-bounds: <field>=<min>:<max>,...")
	cmd.Flags().StringVar(&envoy, "envoy", "", "Also have this Envoy binary load what each fleet would be served; --envoy alone takes $ENVOY, or envoy on PATH.")
	cmd.Flags().Lookup("envoy").NoOptDefVal = envoyOnPath
	return cmd
}

func (o *options) versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "The plugin's version and each replica's of the operator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lines := []versionLine{{Component: "kubectl-envoy", Version: version.Version(), Revision: version.Revision()}}
			if !clientOnly {
				ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
				defer cancel()
				conns, err := o.connect(ctx)
				if err != nil {
					lines = append(lines, versionLine{Component: "operator", Error: err.Error()})
				}
				defer closeAll(conns)
				for _, c := range conns {
					var v debug.VersionInfo
					if err := c.get(ctx, debug.VersionPath, nil, &v); err != nil {
						lines = append(lines, versionLine{Component: "operator", Replica: c.replica, Error: err.Error()})
						continue
					}
					lines = append(lines, versionLine{Component: "operator", Replica: v.Replica, Version: v.Version, Revision: v.Revision})
				}
			}
			return printVersions(o.streams.Out, o.output, lines)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Only the plugin's version.")
	cmd.Flags().StringVarP(&o.output, "output", "o", outputTable, "Output format: table, json or yaml.")
	return cmd
}
