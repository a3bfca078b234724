package envoyconfig

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
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
}

// readReports returns every replica's report, parsing each only when it
// changed. A report that does not parse is left out (its replica writes it
// again); a failed list is an error: a decision or a status made on no
// reports would count no proxy.
func (r *Reconciler) readReports(ctx context.Context) ([]report.Report, error) {
	var list corev1.ConfigMapList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{objects.ComponentLabel: report.Component}); err != nil {
		return nil, fmt.Errorf("listing the replicas' proxy reports: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	out := make([]report.Report, 0, len(list.Items))
	for i := range list.Items {
		cm := &list.Items[i]
		seen[cm.Name] = true
		p, ok := r.reports[cm.Name]
		if !ok || p.resourceVersion != cm.ResourceVersion {
			rep, err := report.Read(cm)
			if err != nil {
				logf.FromContext(ctx).Error(err, "reading a replica's proxy report")
				continue
			}
			p = parsedReport{resourceVersion: cm.ResourceVersion, report: rep}
			r.reports[cm.Name] = p
		}
		out = append(out, p.report)
	}
	for name := range r.reports {
		if !seen[name] {
			delete(r.reports, name)
		}
	}
	return out, nil
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
// only those labelled objects.XDSSecretLabel. Translation decides which of
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
