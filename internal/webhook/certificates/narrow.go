package certificates

import (
	"context"
	"net/http"
	"net/url"
	"path"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RBAC's resourceNames authorize a list or watch only when its field
// selector picks exactly that name (metadata.name=<name>). The certificate
// rotator (open-policy-agent/cert-controller) reads the Secret and the webhook
// configurations through an informer cache of its own that lists and
// watches whole collections, and it offers no option to select them by
// name. narrowedManager gives it a rest.Config whose transport adds that
// selector to its list and watch requests, so that the operator's role can
// name its objects instead of granting every webhook configuration in the
// cluster.

// narrowedManager is mgr with a rest.Config that narrows collection reads
// to the given names, and a client that sends no update that would change
// nothing (unchangedSkipping). Everything else is mgr's.
type narrowedManager struct {
	ctrl.Manager
	cfg    *rest.Config
	client client.Client
}

func (m narrowedManager) GetConfig() *rest.Config  { return m.cfg }
func (m narrowedManager) GetClient() client.Client { return m.client }

// narrowTo returns mgr with collection reads narrowed: names maps a
// collection's URL path (as collectionPath gives it) to the one name read in it.
func narrowTo(mgr ctrl.Manager, names map[string]string) ctrl.Manager {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return nameSelecting{next: rt, names: names} })
	return narrowedManager{Manager: mgr, cfg: cfg, client: unchangedSkipping{Client: mgr.GetClient(), live: mgr.GetAPIReader()}}
}

// unchangedSkipping is a client whose Update sends nothing when the API
// server holds the object, at the same resourceVersion, as it is given. The
// rotator writes its CA into both webhook configurations whenever it looks
// at its Secret, every start of the operator included, whether or not they
// hold it already; with this client, a restart writes nothing.
type unchangedSkipping struct {
	client.Client
	live client.Reader
}

func (c unchangedSkipping) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	cur := obj.DeepCopyObject().(client.Object)
	if err := c.live.Get(ctx, client.ObjectKeyFromObject(obj), cur); err == nil &&
		cur.GetResourceVersion() == obj.GetResourceVersion() && equality.Semantic.DeepEqual(cur, obj) {
		return nil
	}
	return c.Client.Update(ctx, obj, opts...)
}

// collectionPath is the URL path of a collection: group "" is the core API,
// namespace "" a cluster-scoped resource.
func collectionPath(group, version, namespace, resource string) string {
	p := "/apis/" + group + "/" + version
	if group == "" {
		p = "/api/" + version
	}
	if namespace != "" {
		p += "/namespaces/" + namespace
	}
	return path.Join(p, resource)
}

// nameSelecting adds metadata.name=<name> to the field selector of GET
// requests for the collections in names.
type nameSelecting struct {
	next  http.RoundTripper
	names map[string]string
}

func (n nameSelecting) RoundTrip(req *http.Request) (*http.Response, error) {
	if q, ok := withNameSelector(req.Method, req.URL.Path, req.URL.RawQuery, n.names); ok {
		req = req.Clone(req.Context())
		req.URL.RawQuery = q
	}
	return n.next.RoundTrip(req)
}

// withNameSelector returns the query of a list or watch of one of the
// collections in names with the name added to its field selector, and
// whether it applies.
func withNameSelector(method, urlPath, rawQuery string, names map[string]string) (string, bool) {
	name, ok := names[urlPath]
	if !ok || method != http.MethodGet {
		return "", false
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", false
	}
	sel := "metadata.name=" + name
	if old := q.Get("fieldSelector"); old != "" {
		sel = old + "," + sel
	}
	q.Set("fieldSelector", sel)
	return q.Encode(), true
}
