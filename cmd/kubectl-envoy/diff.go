package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/spf13/cobra"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
	"github.com/kube-envoy-controller/kube-envoy-controller/pkg/generated/clientset/versioned"
)

// diff's exit codes, as kubectl diff's: 0 nothing would change, 1 what the
// proxies are served would change, more for errors; and one of its own,
// for files admission would refuse.
const (
	exitChanges = 1
	exitError   = 2
	exitRefused = 3
)

// outputText is diff's default output: the changes, for people.
const outputText = "text"

type diffOptions struct {
	files     []string
	recursive bool
	prune     bool
	offline   bool
	against   []string
	output    string
	// policy is the operator's content policy, from --allowed-files and --allowed-env.
	policy translate.Policy
	// envoy is --envoy: an Envoy binary that loads what each fleet would be served.
	envoy string
}

func (o *options) diffCommand() *cobra.Command {
	d := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff -f <file|dir|->",
		Short: "What each fleet's proxies would be served if the files (EnvoyConfigs, Gateways, routes) were applied, against what they are served now",
		Long: `For each fleet that the EnvoyConfigs of the files touch, compares what its proxies
are served now (its recorded revision, with its EndpointSlices and Secrets as they
are) with what they would be served once the files are applied: per type, the
resources added, removed and changed, with each changed field in Envoy's field
names. Secret material is shown as [redacted].

It reads the EnvoyConfigs of the files' namespaces, each fleet's recorded revision,
and the EndpointSlices and Secrets the EnvoyConfigs name, with your credentials; it
writes nothing. The operator keeps the recorded revisions in its namespace: one you
may not read there is read from the operator's debug endpoint, as config-dump reads
what a fleet is served, which shows it to whoever may get the fleet's EnvoyConfigs.
When neither can be read, a warning says so, and what the fleet is served now is
taken to be what the operator would publish from its EnvoyConfigs as they are.

The files are applied as kubectl apply would store them, in order, each judged by
the operator's admission check against what the ones before it left: a change
admission would refuse is listed with the webhook's message and left out of the
diff. An EnvoyConfig of the files replaces the live one's spec. Only --prune
deletes: the EnvoyConfigs of a fleet the files name that the files do not hold.

Gateway API objects of the files (Gateways, HTTPRoutes, GRPCRoutes and
ReferenceGrants) are shown as what they change in what each Gateway's fleet is
served: each is first sent to the API server in a dry run, which writes nothing
and returns it as it would be stored (defaulted and validated; one it would
refuse is listed with its message), then the Gateways they touch (theirs, those
the routes name in parentRefs, before and after, and every Gateway for a
ReferenceGrant) are translated as the operator translates them, from their
routes, ReferenceGrants, namespaces, backend Services and listener Secrets as
they are and as the files would leave them. What the translation reports of the
files' objects that is not well (a condition False, as their status would say)
is a note. A route the operator refused alone (its status says
RefusedByEnvoy) stays withheld unless the files change it; whether a real Envoy
accepts a changed route is not predicted (but see --envoy).

--offline reads no cluster: the files are compared with nothing, or with the
EnvoyConfigs of --against, as the operator would serve them. Endpoints are then
empty, and the secrets of spec.tlsSecrets are not shown.

--envoy also has a local Envoy load what each fleet would be served (in --mode
validate: it opens no port and no connection); a fleet whose configuration
Envoy refuses is listed, in Envoy's words, and diff exits 3.

Exit status: 0 nothing would change, 1 what the proxies are served would change,
2 an error, 3 admission or the API server (or, with --envoy, Envoy) would refuse
some of the files.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return &exitCodeError{code: exitError, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			code, err := o.runDiff(cmd.Context(), d)
			if err != nil {
				return &exitCodeError{code: exitError, err: err}
			}
			if code != 0 {
				return &exitCodeError{code: code}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitCodeError{code: exitError, err: err} })
	fs := cmd.Flags()
	fs.StringArrayVarP(&d.files, "filename", "f", nil, "A file, a directory of .yaml, .yml and .json files, or - for stdin; repeatable.")
	fs.BoolVarP(&d.recursive, "recursive", "R", false, "Read the directories given with -f and --against recursively.")
	fs.BoolVar(&d.prune, "prune", false, "The files hold every EnvoyConfig of the fleets they name: the others of those fleets are deleted.")
	fs.BoolVar(&d.offline, "offline", false, "Read no cluster: compare the files with nothing, or with the EnvoyConfigs of --against.")
	fs.StringArrayVar(&d.against, "against", nil, "Offline: EnvoyConfigs to compare with, as if they were applied and published (a file, a directory or -); repeatable. Implies --offline.")
	fs.StringVarP(&d.output, "output", "o", outputText, "Output format: text, json or yaml.")
	fs.StringSliceVar(&d.policy.Files, "allowed-files", nil, "Files the operator allows EnvoyConfigs to name (its --envoyconfig-allowed-files); a directory ends in /.")
	fs.StringSliceVar(&d.policy.Env, "allowed-env", nil, "Environment variables the operator allows EnvoyConfigs to name (its --envoyconfig-allowed-env).")
	fs.StringVar(&d.envoy, "envoy", "", "Also have this Envoy binary load what each fleet would be served; --envoy alone takes $ENVOY, or envoy on PATH.")
	fs.Lookup("envoy").NoOptDefVal = envoyOnPath
	return cmd
}

// runDiff returns diff's exit code, or an error.
func (o *options) runDiff(ctx context.Context, d *diffOptions) (int, error) {
	if len(d.files) == 0 {
		return 0, fmt.Errorf("-f is required")
	}
	switch d.output {
	case outputText, outputJSON, outputYAML:
	default:
		return 0, fmt.Errorf("unknown output format %q: want text, json or yaml", d.output)
	}
	offline := d.offline || len(d.against) > 0
	ns, err := o.namespace()
	if err != nil {
		if !offline {
			return 0, err
		}
		ns = "default"
	}
	docs, err := readManifests(d.files, d.recursive, o.streams.In)
	if err != nil {
		return 0, err
	}
	files := decodeConfigs(docs, ns)
	gwFiles, gwProblems := decodeGatewayFiles(docs, ns)
	files.problems = append(files.problems, gwProblems...)
	if len(files.configs) == 0 && len(gwFiles) == 0 && len(files.problems) == 0 {
		return 0, fmt.Errorf("no EnvoyConfig or Gateway API object found in the files (%d other document(s) skipped)", files.skipped)
	}
	if offline && len(gwFiles) > 0 {
		return 0, fmt.Errorf("--offline compares EnvoyConfigs only: a Gateway's translation reads its routes, classes, Services and Secrets from the cluster")
	}

	var (
		w         world
		warnings  []string
		gwChanges []gatewayChange
		gwRefused []refusal
	)
	if offline {
		if w, err = offlineWorld(d.against, d.recursive, ns, o.streams.In); err != nil {
			return 0, err
		}
	} else {
		ctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		var (
			gatewayConfigs []translate.Config
			replan         func(published map[types.NamespacedName]*translate.Config) []gatewayChange
			touched        []types.NamespacedName
		)
		if len(gwFiles) > 0 {
			read, err := o.readGateways(ctx, gwFiles)
			if err != nil {
				return 0, err
			}
			warnings, gwRefused = read.warnings, read.refused
			after := read.live.with(read.files, time.Now())
			touched = touchedGateways(read.live, read.files)
			replan = func(published map[types.NamespacedName]*translate.Config) []gatewayChange {
				return planGateways(read.live, after, read.files, touched, published)
			}
			gwChanges = replan(nil)
			gatewayConfigs = gatewayConfigsOf(gwChanges)
		}
		var more []string
		if w, more, err = o.readWorld(ctx, files.configs, gatewayConfigs...); err != nil {
			return 0, err
		}
		warnings = append(warnings, more...)
		if replan != nil {
			// Translated again with what the fleets' served revisions hold
			// of the Gateways, as the operator translates: a route it
			// refused alone keeps its earlier rules. What those rules use
			// is read already: readWorld reads what the served revisions
			// use.
			gwChanges = replan(servedGateways(w.histories, touched))
		}
		withGateways(&w, gwChanges)
	}
	for _, warning := range warnings {
		fmt.Fprintln(o.streams.ErrOut, "warning:", warning)
	}
	w.policy = d.policy
	w.policy.Namespace = o.operatorNamespace
	if err := w.policy.Check(); err != nil {
		return 0, err
	}

	report := plan(w, append(changesOf(w, files.configs, d.prune), gatewayChanges(gwChanges)...), time.Now())
	addGatewayNotes(&report, gwChanges)
	// The documents that do not decode, and the Gateway API objects the
	// API server would refuse, come first.
	undecoded := make([]refusal, 0, len(files.problems)+len(gwRefused)+len(report.Refused))
	for _, p := range files.problems {
		undecoded = append(undecoded, refusal{Message: p})
	}
	undecoded = append(undecoded, gwRefused...)
	report.Refused = append(undecoded, report.Refused...)
	if d.envoy != "" {
		if err := loadDiffInEnvoy(ctx, d.envoy, &report); err != nil {
			return 0, err
		}
	}
	if err := printDiff(o.streams.Out, d.output, report); err != nil {
		return 0, err
	}
	switch {
	case len(report.Refused) > 0 || len(report.EnvoyRefused) > 0:
		return exitRefused, nil
	case report.changed():
		return exitChanges, nil
	}
	return 0, nil
}

// loadDiffInEnvoy has the Envoy of --envoy load what each fleet of report
// would be served: a refusal is one of report's, and a fleet Envoy loads
// says so in a note.
func loadDiffInEnvoy(ctx context.Context, flag string, report *diffReport) error {
	envoy, err := envoyBinary(flag)
	if err != nil {
		return err
	}
	version, err := envoyVersion(ctx, envoy)
	if err != nil {
		return err
	}
	for i := range report.Fleets {
		f := &report.Fleets[i]
		if len(f.next) == 0 {
			continue
		}
		refused, err := loadServed(ctx, envoy, version, f.next)
		switch {
		case err != nil:
			return err
		case refused != "":
			report.EnvoyRefused = append(report.EnvoyRefused, refusal{Where: "fleet " + f.Fleet, Message: refused})
		default:
			f.Notes = append(f.Notes, fmt.Sprintf("Envoy %s loads what the fleet would be served", version))
		}
	}
	return nil
}

// changesOf is what the files change: each of their EnvoyConfigs, in order,
// and with prune, a deletion of every other EnvoyConfig of w in the fleets
// the files name, in name order.
func changesOf(w world, files []fileConfig, prune bool) []change {
	out := make([]change, 0, len(files))
	inFiles := map[string]bool{}
	named := map[fleet.ID]bool{}
	for _, f := range files {
		out = append(out, change{where: f.where, config: f.config})
		inFiles[f.config.Name] = true
		named[fleetOf(f.config)] = true
	}
	if !prune {
		return out
	}
	var gone []string
	for name, c := range w.configs {
		if !inFiles[name] && named[fleetOf(c)] && !isGatewayConfig(name) {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		out = append(out, change{where: "--prune", config: w.configs[name], delete: true})
	}
	return out
}

// offlineWorld is a world of the EnvoyConfigs of the against files, each
// fleet published as the operator would publish them. They are older than
// the files' EnvoyConfigs, in their order.
func offlineWorld(against []string, recursive bool, ns string, stdin io.Reader) (world, error) {
	w := world{configs: map[string]translate.Config{}, histories: map[fleet.ID]publish.History{}, offline: true}
	if len(against) == 0 {
		return w, nil
	}
	docs, err := readManifests(against, recursive, stdin)
	if err != nil {
		return w, err
	}
	d := decodeConfigs(docs, ns)
	if len(d.problems) > 0 {
		return w, fmt.Errorf("--against: %s", d.problems[0])
	}
	fleets := map[fleet.ID]bool{}
	for i, fc := range d.configs {
		c := fc.config
		c.Created = time.Unix(int64(i), 0)
		w.configs[c.Name] = c
		fleets[fleetOf(c)] = true
	}
	for f := range fleets {
		w.histories[f] = w.assumedHistory(f)
	}
	return w, nil
}

// readWorld reads, with the caller's credentials, what diff starts from:
// the EnvoyConfigs of the files' namespaces (an error if the caller may not
// list them, as with kubectl diff), the recorded history of each fleet the
// files touch, and the EndpointSlices and Secrets their EnvoyConfigs name.
// A fleet's history is read from the operator's namespace, where the
// operator keeps it, or, by a caller who may not read there, from the
// operator's debug endpoint, which shows it to whoever may get the fleet's
// EnvoyConfigs (operatorHistories). What the caller cannot read of the last
// three is a warning: a fleet's history is then assumed
// (world.assumedHistory); the endpoints of a Service and the secret of a
// Secret are left out, on both sides of the diff.
//
// gateways are the Configs of Gateways, as they are and as they would be
// (planGateways): their namespaces, fleets, Services and Secrets count as
// the files' EnvoyConfigs' do.
func (o *options) readWorld(ctx context.Context, files []fileConfig, gateways ...translate.Config) (world, []string, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return world{}, nil, err
	}
	ec, err := versioned.NewForConfig(cfg)
	if err != nil {
		return world{}, nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return world{}, nil, err
	}
	w := world{
		configs:    map[string]translate.Config{},
		histories:  map[fleet.ID]publish.History{},
		slices:     map[string]map[string][]discoveryv1.EndpointSlice{},
		secrets:    map[string]map[string]corev1.Secret{},
		unreadable: map[string]bool{},
		status:     map[string]recordedStatus{},
	}
	var warnings []string

	namespaces := map[string]bool{}
	for _, f := range files {
		ns, _ := splitName(f.config.Name)
		namespaces[ns] = true
	}
	for _, c := range gateways {
		ns, _ := splitName(c.Name)
		namespaces[ns] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		list, err := ec.ExampleV1().EnvoyConfigs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return w, nil, fmt.Errorf("listing the EnvoyConfigs of namespace %s: %w", ns, err)
		}
		for i := range list.Items {
			if item := &list.Items[i]; item.DeletionTimestamp.IsZero() {
				c := translate.FromObject(item)
				w.configs[c.Name] = c
				w.status[c.Name] = recordedStatus{generation: item.Generation, status: item.Status}
			}
		}
	}

	// The fleets the files touch: theirs, and those their EnvoyConfigs
	// leave when they change envoyRef.
	fleets := map[fleet.ID]bool{}
	for _, f := range files {
		fleets[fleetOf(f.config)] = true
		if live, ok := w.configs[f.config.Name]; ok {
			fleets[fleetOf(live)] = true
		}
	}
	for _, c := range gateways {
		fleets[fleetOf(c)] = true
	}
	var fromOperator []fleet.ID
	for _, f := range sortedFleets(fleets) {
		cm, err := kc.CoreV1().ConfigMaps(o.operatorNamespace).Get(ctx, history.Name(f), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // never published
		case apierrors.IsForbidden(err):
			fromOperator = append(fromOperator, f)
			continue
		case err != nil:
			return w, nil, fmt.Errorf("reading the recorded revision of fleet %s: %w", f, err)
		}
		h, err := history.Read(cm, o.operatorNamespace, f)
		if err != nil {
			// Not the fleet's history as the operator writes it: the operator
			// does not use it either, and writes it afresh.
			warnings = append(warnings, fmt.Sprintf("fleet %s: its recorded revision is not usable (%v): %s", f, err, assumed))
			h = w.assumedHistory(f)
		}
		w.histories[f] = h
	}
	if len(fromOperator) > 0 {
		warnings = append(warnings, o.operatorHistories(ctx, w, fromOperator)...)
	}

	// Every EnvoyConfig whose Services and Secrets count: the files', and
	// the touched fleets' as they are and as recorded.
	uses := make([]translate.Config, 0, len(files)+len(gateways))
	for _, f := range files {
		uses = append(uses, f.config)
	}
	uses = append(uses, gateways...)
	for _, f := range sortedFleets(fleets) {
		uses = append(uses, fleetConfigs(w.configs, f)...)
		if rev := w.histories[f].Served(); rev != nil {
			uses = append(uses, rev.Configs...)
		}
	}

	seen := map[string]bool{}
	for _, c := range uses {
		ns, _ := splitName(c.Name)
		for _, se := range c.Spec.ServiceEndpoints {
			// A Gateway's Config names a Service of another namespace as
			// namespace/name, and its slices are keyed so.
			sns, svc := ns, se.Service
			if other, name, ok := strings.Cut(se.Service, "/"); ok {
				sns, svc = other, name
			}
			if key := "service " + ns + "/" + se.Service; !seen[key] {
				seen[key] = true
				list, err := kc.DiscoveryV1().EndpointSlices(sns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
				switch {
				case apierrors.IsForbidden(err):
					warnings = append(warnings, fmt.Sprintf("the endpoints of Service %s/%s are left out: %v", sns, svc, err))
				case err != nil:
					return w, nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", sns, svc, err)
				default:
					if w.slices[ns] == nil {
						w.slices[ns] = map[string][]discoveryv1.EndpointSlice{}
					}
					w.slices[ns][se.Service] = list.Items
				}
			}
		}
		if isGatewayConfig(c.Name) {
			continue // its Secrets are the listeners', read with the Gateway (readGateways)
		}
		for _, ts := range c.Spec.TLSSecrets {
			if key := "secret " + ns + "/" + ts.SecretRef; !seen[key] {
				seen[key] = true
				s, err := kc.CoreV1().Secrets(ns).Get(ctx, ts.SecretRef, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
					// Translation says the Secret is missing.
				case apierrors.IsForbidden(err):
					warnings = append(warnings, fmt.Sprintf("the secrets that Secret %s/%s serves are left out: %v", ns, ts.SecretRef, err))
					w.unreadable[ns+"/"+ts.SecretRef] = true
				case err != nil:
					return w, nil, fmt.Errorf("reading Secret %s/%s: %w", ns, ts.SecretRef, err)
				default:
					if _, labelled := s.Labels[names.XDSSecretLabel]; labelled {
						// The operator reads only the Secrets that carry the label.
						if w.secrets[ns] == nil {
							w.secrets[ns] = map[string]corev1.Secret{}
						}
						w.secrets[ns][ts.SecretRef] = *s
					}
				}
			}
		}
	}
	return w, warnings, nil
}

// assumed ends the warning about a fleet whose recorded history diff cannot
// read.
const assumed = "what it is served now is taken to be what the operator would publish from its EnvoyConfigs as they are"

// operatorHistories reads the recorded histories of fleets from the
// operator's debug endpoint, into w.histories, which shows a fleet's history to whoever may
// get its EnvoyConfigs, with the served revision's secret material redacted
// (unredacted restores what the EnvoyConfigs still hold). The first replica
// that answers is asked: every replica reads the same history. A fleet
// whose history cannot be read so is a warning, and its history is assumed.
func (o *options) operatorHistories(ctx context.Context, w world, fleets []fleet.ID) []string {
	var warnings []string
	conns, err := o.connect(ctx)
	if err != nil {
		for _, f := range fleets {
			warnings = append(warnings, fmt.Sprintf("fleet %s: its recorded revision is readable neither in namespace %s nor from the operator's debug endpoint (%v): %s",
				f, o.operatorNamespace, err, assumed))
			w.histories[f] = w.assumedHistory(f)
		}
		return warnings
	}
	defer closeAll(conns)
	for _, f := range fleets {
		rh, err := historyFrom(ctx, conns, f)
		switch {
		case err != nil:
			warnings = append(warnings, fmt.Sprintf("fleet %s: its recorded revision is not readable from the operator's debug endpoint (%v): %s", f, err, assumed))
			w.histories[f] = w.assumedHistory(f)
		case rh.Recorded:
			h, exact := unredacted(rh.History, fleetConfigs(w.configs, f))
			if !exact {
				warnings = append(warnings, fmt.Sprintf("fleet %s: its served revision holds secret material inline that its EnvoyConfigs no longer hold, "+
					"which the operator does not show: it is compared redacted, and its versions may differ from the operator's", f))
			}
			w.histories[f] = h
		}
	}
	return warnings
}

// historyFrom asks the replicas of conns, in turn, for fleet f's recorded
// history, until one answers. A refusal ends the asking: every replica
// asks the API server the same question.
func historyFrom(ctx context.Context, conns []connection, f fleet.ID) (debug.RecordedHistory, error) {
	var errs []error
	for _, c := range conns {
		var rh debug.RecordedHistory
		err := c.get(ctx, debug.HistoryPath, url.Values{"fleet": {f.String()}}, &rh)
		if err == nil {
			return rh, nil
		}
		var refused *statusError
		if errors.As(err, &refused) && (refused.code == http.StatusForbidden || refused.code == http.StatusUnauthorized) {
			return rh, err
		}
		errs = append(errs, fmt.Errorf("replica %s: %w", c.replica, err))
	}
	return debug.RecordedHistory{}, errors.Join(errs...)
}

// splitName splits an EnvoyConfig's namespace/name.
func splitName(name string) (namespace, short string) {
	namespace, short, _ = strings.Cut(name, "/")
	return namespace, short
}

// sortedFleets returns the fleets of m in order.
func sortedFleets(m map[fleet.ID]bool) []fleet.ID {
	return slices.SortedFunc(maps.Keys(m), func(a, b fleet.ID) int { return strings.Compare(a.String(), b.String()) })
}

// exitCodeError ends the command with code, saying err if there is one.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitCodeError) Unwrap() error { return e.err }
