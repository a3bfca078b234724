package envoyconfig

import (
	"context"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history/store"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// world is what a reconcile reads of one fleet: the first phase's output,
// and every later phase's input.
type world struct {
	id fleet.ID
	// configs are the fleet's EnvoyConfigs that are not being deleted, and
	// current the same as translation takes them.
	configs []*examplev1.EnvoyConfig
	current []translate.Config
	// envoy is the fleet's Envoy; nil when there is none.
	envoy *examplev1.Envoy
	// stored is the fleet's history as the API server holds it.
	stored store.Stored
	// slices and secrets are what the EnvoyConfigs, current and published,
	// take endpoints and certificates from; not read for a fleet that is gone.
	slices  map[string][]discoveryv1.EndpointSlice
	secrets map[string]corev1.Secret
	// gateway is set when the fleet serves a Gateway (gateway.go).
	gateway *gatewayWorld
}

// gone reports whether the fleet is really gone: no EnvoyConfig and no
// Envoy, so nothing to serve and no history to keep.
func (w *world) gone() bool { return len(w.current) == 0 && w.envoy == nil }

// unrecorded reports whether the fleet never had an EnvoyConfig nor served
// a Gateway: it is served empty, and nothing is recorded for it.
func (w *world) unrecorded() bool { return len(w.current) == 0 && w.stored.Object == nil }

// published is the content of the fleet's served revision, as stored.
func (w *world) published() []translate.Config {
	if rev := w.stored.History.Served(); rev != nil {
		return rev.Configs
	}
	return nil
}

// input is what translation makes the fleet's IR from.
func (w *world) input(pol translate.Policy) translate.Input {
	return translate.Input{Configs: w.current, Published: w.published(), Slices: w.slices, Secrets: w.secrets, Policy: pol,
		Withheld: w.stored.History.Withheld}
}

// read reads the fleet's world from the cache: its EnvoyConfigs, its
// Envoy, its stored history and, unless the fleet is gone, the
// EndpointSlices and Secrets its content uses.
func (r *Reconciler) read(ctx context.Context, id fleet.ID) (*world, error) {
	w := &world{id: id}
	var list examplev1.EnvoyConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(id.Namespace), client.MatchingFields{envoyRefIndex: id.Name}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			w.configs = append(w.configs, &list.Items[i])
			w.current = append(w.current, translate.FromObject(&list.Items[i]))
		}
	}
	envoy := &examplev1.Envoy{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, envoy); {
	case err == nil:
		w.envoy = envoy
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	if err := r.readGateway(ctx, w); err != nil {
		return nil, err
	}
	var err error
	if w.stored, err = r.Histories.Load(ctx, id, Vouched(w.configs)); err != nil || w.gone() {
		return w, err
	}
	if w.slices, err = r.slices(ctx, id.Namespace, w.current, w.published()); err != nil {
		return nil, err
	}
	if w.secrets, err = r.secrets(ctx, id.Namespace, w.current, w.published()); err != nil {
		return nil, err
	}
	if w.gateway != nil {
		maps.Copy(w.secrets, w.gateway.secrets)
	}
	return w, nil
}

// parsedReport is a replica's report as read at a resourceVersion.
type parsedReport struct {
	resourceVersion string
	report          report.Report
	// pod is the replica's pod, the report's owner, when it runs in one.
	pod *metav1.OwnerReference
}

// readReports returns every replica's report, parsing each only when it
// changed. A report that does not parse is left out (its replica writes it
// again); a failed list is an error: a decision or a status made on no
// reports would count no proxy.
func (r *Reconciler) readReports(ctx context.Context) ([]report.Report, error) {
	var list corev1.ConfigMapList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{names.ComponentLabel: report.Component}); err != nil {
		return nil, fmt.Errorf("listing the replicas' proxy reports: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	out := make([]report.Report, 0, len(list.Items))
	for i := range list.Items {
		cm := &list.Items[i]
		seen[cm.Name] = true
		if r.leftovers.has(cm.Name, cm.ResourceVersion) {
			continue // its replica is gone (leaveOutLeftovers)
		}
		p, ok := r.reports[cm.Name]
		if !ok || p.resourceVersion != cm.ResourceVersion {
			rep, err := report.Read(cm)
			if err != nil {
				logf.FromContext(ctx).Error(err, "reading a replica's proxy report")
				continue
			}
			p = parsedReport{resourceVersion: cm.ResourceVersion, report: rep}
			for _, o := range cm.OwnerReferences {
				if o.APIVersion == "v1" && o.Kind == "Pod" {
					p.pod = &o
				}
			}
			r.reports[cm.Name] = p
		}
		out = append(out, p.report)
	}
	for name := range r.reports {
		if !seen[name] {
			delete(r.reports, name)
		}
	}
	r.leftovers.prune(seen)
	return out, nil
}

// A replica deletes its report when it stops. One that is killed leaves
// it behind: in a cluster, the garbage collector deletes it with the
// replica's pod, its owner; a pod whose node is lost stays until it is
// evicted, minutes later. Such a report names the revision its replica
// last served, with proxies that are gone (they connect to another
// replica), and holds the status of every fleet it names at each new
// revision (answersWait), counts those proxies as connected and answering
// neither way, and keeps the revision from being marked accepted. When a
// report still names another revision once answersWait passed, the leader
// asks after its owner: a pod that is gone, another pod of the same name,
// or one being deleted runs no replica; one that is not Ready (its xDS
// server is out of the Service's endpoints, or its cache out of sync) and
// has not reported the revision in answersWait is taken for one that does
// not serve. Its report, at that resourceVersion, is left out of every sum
// until its replica writes it again. A report with no owner (a replica outside a cluster) is kept: its
// replica cannot be asked after.

// leftoverReports are the reports left out, by ConfigMap name, at the
// resourceVersion they were found left behind.
type leftoverReports struct{ m sync.Map }

func (l *leftoverReports) has(name, resourceVersion string) bool {
	v, ok := l.m.Load(name)
	return ok && v.(string) == resourceVersion
}

func (l *leftoverReports) prune(seen map[string]bool) {
	l.m.Range(func(k, _ any) bool {
		if !seen[k.(string)] {
			l.m.Delete(k)
		}
		return true
	})
}

// leaveOutLeftovers asks after the owners of the reports that name fleet
// fleetID at another revision than version, and leaves out those whose
// replica is gone. It reports whether it left one out: the reports are
// read again.
func (r *Reconciler) leaveOutLeftovers(ctx context.Context, fleetID, version string) (bool, error) {
	if r.APIReader == nil {
		return false, nil
	}
	type candidate struct {
		name, resourceVersion string
		pod                   metav1.OwnerReference
	}
	var candidates []candidate
	r.mu.Lock()
	for name, p := range r.reports {
		if p.pod != nil && !r.leftovers.has(name, p.resourceVersion) && report.Behind([]report.Report{p.report}, fleetID, version) {
			candidates = append(candidates, candidate{name, p.resourceVersion, *p.pod})
		}
	}
	r.mu.Unlock()
	left := false
	for _, c := range candidates {
		pod := &corev1.Pod{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: c.pod.Name}, pod)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return left, fmt.Errorf("reading the pod of a replica's proxy report: %w", err)
		case pod.UID == c.pod.UID && pod.DeletionTimestamp.IsZero() && podReady(pod):
			continue // its replica runs, and will report
		}
		logf.FromContext(ctx).Info("leaving out the proxy report of a replica that is gone", "configMap", c.name, "pod", c.pod.Name)
		r.leftovers.m.Store(c.name, c.resourceVersion)
		left = true
	}
	return left, nil
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// slices returns, by Service, the EndpointSlices of the Services that the
// fleet's EnvoyConfigs, current and published, take endpoints from.
func (r *Reconciler) slices(ctx context.Context, ns string, configs ...[]translate.Config) (map[string][]discoveryv1.EndpointSlice, error) {
	out := map[string][]discoveryv1.EndpointSlice{}
	for _, cs := range configs {
		for _, c := range cs {
			for _, se := range c.Spec.ServiceEndpoints {
				if _, done := out[se.Service]; done {
					continue
				}
				var list discoveryv1.EndpointSliceList
				key := refKey(se.Service, ns) // a Gateway's backend may be of another namespace
				if err := r.Client.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: key.Name}); err != nil {
					return nil, err
				}
				out[se.Service] = list.Items
			}
		}
	}
	return out, nil
}

// secrets returns, by name, the Secrets that the fleet's EnvoyConfigs,
// current and published, name in spec.tlsSecrets, as the cache holds them:
// only those labelled names.XDSSecretLabel. Translation decides which of
// them are served; their data goes to the xDS server only, never to status,
// events, logs or the revision history.
func (r *Reconciler) secrets(ctx context.Context, ns string, configs ...[]translate.Config) (map[string]corev1.Secret, error) {
	out := map[string]corev1.Secret{}
	seen := map[string]bool{}
	for _, cs := range configs {
		for _, c := range cs {
			for _, ts := range c.Spec.TLSSecrets {
				if seen[ts.SecretRef] {
					continue
				}
				seen[ts.SecretRef] = true
				s := &corev1.Secret{}
				err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ts.SecretRef}, s)
				switch {
				case apierrors.IsNotFound(err):
					continue // missing or not labelled: translation says so
				case err != nil:
					return nil, err
				}
				out[ts.SecretRef] = *s
			}
		}
	}
	return out, nil
}
