package controller_test

// The drift test proves, field by field, what docs/concepts/architecture.md
// ("How the controllers behave") promises of every child a controller
// renders: each field it sets, zero or not, is put back after a hand edit,
// with one write; and no field it leaves unset (the API server's defaults,
// labels and annotations others add) is ever written.
//
// The controllers' reconcilers run only when the test calls them: nothing
// watches, so each edit is followed by exactly one reconcile, the test's,
// and every write it counts is that reconcile's.

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoyconfig"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/foo"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/foobar"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/gateway"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/podset"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/watcher"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/objects"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	xdsgateway "github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

var (
	suite testenv.Suite
	// reconcilers are the controllers under test, by name, on the suite's
	// manager (its counted client and its cache), never started.
	reconcilers = map[string]reconcile.Reconciler{}
	// ca issues the client certificates of fleets of the built-in xDS server.
	ca *authority.Store
)

// builtin: fleets reach the built-in xDS server over mutual TLS, so that an
// Envoy renders every kind of child it can have, its certificate's Secret too.
var builtin = fleet.Defaults{XDS: proxy.XDSServer{ClusterName: fleet.XDSClusterName, Host: "builtin.svc", Port: 18000, MutualTLS: true},
	Namespace: "default", XDSPorts: []int32{18000, 18001}}

func TestMain(m *testing.M) {
	suite.GatewayAPI = true
	suite.Main(m, func(mgr ctrl.Manager) error {
		var err error
		ca, err = authority.Add(mgr, authority.Config{Namespace: "default", Hosts: []string{"builtin.svc"},
			Options: pki.Options{TrustDomain: "cluster.local", CAValidity: 30 * 24 * time.Hour, CertValidity: 24 * time.Hour, Propagation: time.Second}})
		if err != nil {
			return err
		}
		// What the controllers' SetupWithManager would register, but their watches.
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{},
			&policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}, &batchv1.Job{}, &networkingv1.NetworkPolicy{}} {
			if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), obj); err != nil {
				return err
			}
		}
		if err := objects.IndexByController(context.Background(), mgr.GetFieldIndexer(), &examplev1.Envoy{}); err != nil {
			return err
		}
		// The Gateways' class, this operator's, with no template.
		c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		if err := c.Create(context.Background(), &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: driftClass},
			Spec: gwv1.GatewayClassSpec{ControllerName: xdsgateway.ControllerName}}); err != nil {
			return err
		}
		reconcilers[envoy.ControllerName] = envoy.NewReconciler(mgr, builtin, ca)
		reconcilers[gateway.ControllerName] = gateway.NewReconciler(mgr)
		reconcilers[foo.ControllerName] = foo.NewReconciler(mgr)
		reconcilers[watcher.ControllerName] = watcher.NewReconciler(mgr)
		return nil
	})
}

// driftClass is the GatewayClass of the drift test's Gateway.
const driftClass = "kec-drift"

// owner is an object whose children the drift test checks: its controller,
// the object (created in the test's namespace), and its children as the
// controller's render makes them from the live owner.
type owner struct {
	controller string
	obj        client.Object
	render     func(ctx context.Context, t *testing.T, live client.Object) []client.Object
}

// owners spread over every controller that renders children and compares
// them, and over every kind of child each has. Their specs set what
// renders the most fields: zero replicas, low ports, an autoscaler and a
// budget, spread constraints, resources, pod labels and annotations.
func owners(ns string) []owner {
	return []owner{
		{controller: envoy.ControllerName, obj: &examplev1.Envoy{
			ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: ns},
			Spec: examplev1.EnvoySpec{
				Replicas:                      ptr.To[int32](3),
				DrainSeconds:                  ptr.To[int32](20),
				TerminationGracePeriodSeconds: ptr.To[int64](40),
				PodDisruptionBudget:           &examplev1.EnvoyDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("25%"))},
				TopologySpreadConstraints: []examplev1.EnvoySpreadConstraint{
					{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: ptr.To[int32](2)},
				},
				Autoscaling: &examplev1.EnvoyAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6, TargetCPUUtilizationPercentage: ptr.To[int32](70)},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
				Ports: []examplev1.EnvoyPort{
					{Name: "http", Port: 80, TargetPort: 80},
					{Name: "https", Port: 443, TargetPort: 8443},
				},
				ServiceType:    corev1.ServiceTypeNodePort,
				LogLevel:       "debug",
				PodLabels:      map[string]examplev1.LabelValue{"team": "edge"},
				PodAnnotations: map[string]string{"example.com/note": "kept"},
			},
		}, render: renderEnvoy},
		// Zero proxies, and an xDS server of its own: plaintext, so no
		// certificate, and the render's other branches.
		{controller: envoy.ControllerName, obj: &examplev1.Envoy{
			ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: ns},
			Spec: examplev1.EnvoySpec{
				Replicas: ptr.To[int32](0),
				XDS:      &examplev1.XDS{Host: "xds.example", Port: 18000},
			},
		}, render: renderEnvoy},
		{controller: gateway.ControllerName, obj: &gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
			Spec: gwv1.GatewaySpec{
				GatewayClassName: driftClass,
				Listeners: []gwv1.Listener{
					{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
					{Name: "alt", Port: 8080, Protocol: gwv1.HTTPProtocolType},
				},
				Infrastructure: &gwv1.GatewayInfrastructure{
					Labels:      map[gwv1.LabelKey]gwv1.LabelValue{"team": "edge"},
					Annotations: map[gwv1.AnnotationKey]gwv1.AnnotationValue{"example.com/note": "kept"},
				},
			},
		}, render: func(_ context.Context, _ *testing.T, live client.Object) []client.Object {
			return []client.Object{gateway.Fleet(live.(*gwv1.Gateway), nil)}
		}},
		{controller: foo.ControllerName, obj: &samplev1alpha1.Foo{
			ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: ns},
			Spec:       samplev1alpha1.FooSpec{DeploymentName: "sample", Replicas: ptr.To[int32](1)},
		}, render: func(_ context.Context, _ *testing.T, live client.Object) []client.Object {
			return []client.Object{foo.Deployment(live.(*samplev1alpha1.Foo))}
		}},
		{controller: watcher.ControllerName, obj: &watchv1alpha1.Watcher{
			ObjectMeta: metav1.ObjectMeta{Name: "tail", Namespace: ns},
			Spec: watchv1alpha1.WatcherSpec{
				Container:        corev1.Container{Name: "tail", Image: "busybox"},
				ConfigData:       map[string]string{"LEVEL": "debug", "EMPTY": ""},
				ConfigBinaryData: map[string][]byte{"blob": {0, 1, 2}},
			},
		}, render: func(_ context.Context, _ *testing.T, live client.Object) []client.Object {
			return []client.Object{watcher.ConfigMap(live.(*watchv1alpha1.Watcher))}
		}},
	}
}

// renderEnvoy is every child of an Envoy, its client certificate's Secret
// rendered from the Secret as found, as the reconciler does.
func renderEnvoy(ctx context.Context, t *testing.T, live client.Object) []client.Object {
	e := live.(*examplev1.Envoy)
	want, err := envoy.Desired(e, builtin)
	if err != nil {
		t.Fatal(err)
	}
	out := []client.Object{want.ConfigMap, want.Deployment, want.Service}
	if want.PodDisruptionBudget != nil {
		out = append(out, want.PodDisruptionBudget)
	}
	if want.HorizontalPodAutoscaler != nil {
		out = append(out, want.HorizontalPodAutoscaler)
	}
	if want.NetworkPolicy != nil {
		out = append(out, want.NetworkPolicy)
	}
	if !want.XDS.MutualTLS {
		return out
	}
	a, err := ca.Authority(ctx)
	if err != nil {
		t.Fatal(err)
	}
	existing := &corev1.Secret{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: fleet.ClientSecretName(e)}, existing); err != nil {
		existing = nil
	}
	secret, _, err := envoy.ClientCertificate(e, a, existing, time.Now(), ca.Options)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, secret)
}

// notDrifted are the controllers whose children the drift test does not
// edit, and why. With owners, they must name every controller there is.
var notDrifted = map[string]string{
	envoyconfig.ControllerName: "it renders no child: a fleet's revision history, in the operator's namespace, is a record " +
		"that history.Read checks by its content, and one that does not pass is written afresh, not compared field by field",
	foobar.ControllerName: "its Jobs are create-only (objects.Jobs): a Job's pod template cannot change, and a Job that ran is the record of that run",
	podset.ControllerName: "it creates pods and never updates one: a pod's spec cannot change but for a few fields, and a PodSet replaces pods instead of editing them",
}

// excluded are the fields a render sets that the test does not edit, by
// kind ("" for every kind) and path (a field and everything under it; list
// indices written [*]), and why.
var excluded = map[string]map[string]string{
	"": {
		"apiVersion":               "names the object's type: it cannot change",
		"kind":                     "names the object's type: it cannot change",
		"metadata.name":            "names the object: it cannot change, and a child under another name is another object (DeleteRenamed)",
		"metadata.namespace":       "cannot change",
		"metadata.ownerReferences": "says whose the object is: a child that another owner controls is foreign, and left alone (Clash)",
		"status":                   "a render sets no status: the status is written by others, through its subresource",
	},
	"Deployment": {
		"spec.selector": "immutable in apps/v1",
		"spec.template.metadata.labels[\"app.kubernetes.io/name\"]":     "the selector names it: the API server refuses a template the selector does not match",
		"spec.template.metadata.labels[\"app.kubernetes.io/instance\"]": "the selector names it: the API server refuses a template the selector does not match",
		"spec.template.metadata.labels.app":                             "the selector names it: the API server refuses a template the selector does not match",
		"spec.template.metadata.labels.controller":                      "the selector names it: the API server refuses a template the selector does not match",
		"spec.strategy": "an empty struct: the render sets none of its fields, and the API server defaults them",
		"spec.template.spec.containers[*].resources":                        "an empty struct where the spec asks for no resources: it is in the JSON of every container, and removing it changes nothing",
		"spec.template.spec.volumes[*].name":                                "the containers' volumeMounts name it: the API server refuses a mount of no volume",
		"spec.template.spec.containers[*].volumeMounts[*].name":             "names a volume: the API server refuses a mount of no volume",
		"spec.template.spec.topologySpreadConstraints[*].whenUnsatisfiable": "the render sets minDomains, which the API server admits only with DoNotSchedule",
		"spec.template.spec.volumes[*].emptyDir": "an empty struct: removing it leaves a volume of no source, which the API server refuses; " +
			"internal/objects' TestEnsureEnforcesZeroValues swaps it for a hostPath",
	},
	"Secret": {
		"type": "immutable",
	},
	"NetworkPolicy": {
		"spec.egress[*].to[*].ipBlock.cidr": "0.0.0.0/0 and ::/0, which the render writes without an allowlist, are the only ranges of their family " +
			"that hold every except entry (the metadata ranges lie at both ends of the address space): the API server refuses any other; the excepts are edited",
	},
	"Envoy": {
		"spec.resources":   "a Gateway's fleet without a template sets no compute resources: the edit writes {} over the empty object, one value",
		"spec.serviceType": "an enum: the API server refuses any other value; a Gateway's fleet is always LoadBalancer",
	},
	"HorizontalPodAutoscaler": {
		"spec.metrics[*].type":                 "names which of the metric's sources is set: the API server refuses another with the same source",
		"spec.metrics[*].resource.target.type": "names which of the target's values is set: the API server refuses another with the same value",
	},
}

// reissued are the fields that a hand edit does not get back, but that are
// made anew: after the reconcile they hold what the render now makes,
// which is not the edit and need not be the value before it.
var reissued = map[string]map[string]string{
	"Secret": {
		"data[\"tls.crt\"]": "a client certificate changed by hand is not put back but replaced by a newly issued one (pki.Current)",
		"data[\"tls.key\"]": "the key goes with the certificate issued anew",
	},
}

// extraWrites are the fields whose edit costs the reconcile more than the
// one update, and why.
var extraWrites = map[string]map[string]string{}

func init() {
	// The manager's cache holds the objects of these kinds that carry the
	// label (manager.CacheOptions); it holds Secrets by another.
	for _, kind := range []string{"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "NetworkPolicy"} {
		extraWrites[kind] = map[string]string{
			"metadata.labels[\"app.kubernetes.io/managed-by\"]": "it takes the object out of the manager's cache: " +
				"the reconcile's create is refused first, then the object read past the cache is updated",
		}
	}
}

// unsetExcluded are the fields a render leaves unset that the test does
// not edit, by kind and path as in excluded, and why.
var unsetExcluded = map[string]map[string]string{
	"": {
		"metadata.uid":               "set by the API server, cannot change",
		"metadata.resourceVersion":   "the API server's",
		"metadata.generation":        "the API server's",
		"metadata.creationTimestamp": "the API server's",
		"metadata.managedFields":     "the API server's record of field managers",
		"status":                     "written by others, through its subresource: an update of the object does not change it",
	},
	"Deployment": {
		"spec.template.spec.restartPolicy": "the API server admits only Always in a Deployment",
		"spec.strategy.type":               "the API server refuses Recreate while rollingUpdate, which it defaulted, is set",
		"spec.template.spec.containers[*].env[*].valueFrom.fieldRef.apiVersion": "the API server admits only v1",
	},
	"Envoy": {
		"spec.logLevel": "an enum: the API server refuses any other value",
	},
	"Service": {
		"spec.clusterIP":  "immutable",
		"spec.clusterIPs": "immutable",
		"spec.ipFamilies": "the API server admits IPv4 or IPv6, and the test's cluster has IPv4 alone",
	},
}

func TestEveryControllerIsCovered(t *testing.T) {
	covered := map[string]bool{}
	for _, o := range owners("ns") {
		covered[o.controller] = true
	}
	for _, name := range controller.Names() {
		if covered[name] == (notDrifted[name] != "") {
			t.Errorf("controller %q must have an owner in the drift test, or a reason in notDrifted, not both", name)
		}
	}
	for name := range notDrifted {
		if !slices.Contains(controller.Names(), name) {
			t.Errorf("notDrifted names %q, which is no controller", name)
		}
	}
}

// TestDrift edits, one at a time, every field each owner's children set,
// and then every field they leave unset, through the API server, and runs
// one reconcile after each edit.
func TestDrift(t *testing.T) {
	ctx := context.Background()
	ns := suite.Namespace(t)
	used := map[string]bool{}
	var stats []string
	// A fleet's children include a certificate the authority issues.
	testenv.Authority(t, ca)
	for _, o := range owners(ns) {
		t.Run(o.controller+"/"+o.obj.GetName(), func(t *testing.T) {
			if err := suite.Client.Create(ctx, o.obj); err != nil {
				t.Fatal(err)
			}
			d := newDrifter(ctx, t, o)
			d.settle()
			d.checkKinds()
			for _, child := range d.children {
				kind := child.GetKind()
				t.Run(kind, func(t *testing.T) {
					d.t = t
					set, unset := d.driftSet(child, used), d.driftUnset(child, used)
					stats = append(stats, fmt.Sprintf("%s %s %s: %d fields it sets edited, %d it leaves unset",
						o.controller, o.obj.GetName(), kind, set, unset))
				})
			}
		})
	}
	if t.Failed() {
		return // a table entry may have gone unused for that
	}
	for _, table := range []struct {
		name, use string
		entries   map[string]map[string]string
	}{{"excluded", "excluded", excluded}, {"unsetExcluded", "unset", unsetExcluded}, {"reissued", "reissued", reissued}, {"extraWrites", "extra", extraWrites}} {
		for kind, paths := range table.entries {
			for path := range paths {
				if !used[table.use+" "+kind+" "+path] {
					t.Errorf("%s[%q][%q] matched no field: remove it", table.name, kind, path)
				}
			}
		}
	}
	for _, s := range stats {
		t.Log(s)
	}
}

// drifter edits one owner's children and reconciles it.
type drifter struct {
	ctx      context.Context
	t        *testing.T
	o        owner
	req      reconcile.Request
	children []*unstructured.Unstructured
}

func newDrifter(ctx context.Context, t *testing.T, o owner) *drifter {
	return &drifter{ctx: ctx, t: t, o: o, req: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o.obj)}}
}

// render returns the owner's children as its controller renders them now,
// from the owner as it is, as unstructured objects in the JSON form the
// API server receives.
func (d *drifter) render() []*unstructured.Unstructured {
	d.t.Helper()
	live := d.o.obj.DeepCopyObject().(client.Object)
	if err := suite.Client.Get(d.ctx, d.req.NamespacedName, live); err != nil {
		d.t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, obj := range d.o.render(d.ctx, d.t, live) {
		out = append(out, toUnstructured(d.t, obj))
	}
	return out
}

func toUnstructured(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, suite.Client.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

// reconcile runs one reconcile and returns the write requests it sent to
// the namespace, but events: they are sent asynchronously, so that a count
// of them would depend on timing.
func (d *drifter) reconcile() []string {
	d.t.Helper()
	d.sync()
	suite.Counter.Reset()
	if _, err := reconcilers[d.o.controller].Reconcile(d.ctx, d.req); err != nil {
		d.t.Fatalf("reconcile: %v", err)
	}
	var out []string
	for _, w := range suite.Counter.WritesTo("/namespaces/" + d.req.Namespace + "/") {
		if !strings.Contains(w, "/events") {
			out = append(out, w)
		}
	}
	return out
}

// settle reconciles the new owner until a reconcile writes nothing.
func (d *drifter) settle() {
	d.t.Helper()
	testenv.Eventually(d.t, "the owner to settle", func() (bool, error) {
		return len(d.reconcile()) == 0, nil
	})
	d.children = d.render()
}

// checkKinds fails unless the owner's render holds every object the
// owner controls, of every kind the operator creates.
func (d *drifter) checkKinds() {
	d.t.Helper()
	var rendered, found []string
	for _, c := range d.children {
		rendered = append(rendered, c.GetKind()+" "+c.GetName())
	}
	ownerGVK, err := apiutil.GVKForObject(d.o.obj, suite.Client.Scheme())
	if err != nil {
		d.t.Fatal(err)
	}
	// The kinds the operator creates: those its cache trims to its own,
	// and Envoys, which a Gateway's fleet is.
	kinds := slices.Collect(maps.Keys(manager.CacheOptions().ByObject))
	kinds = append(kinds, &examplev1.Envoy{})
	for _, obj := range kinds {
		gvk, err := apiutil.GVKForObject(obj, suite.Client.Scheme())
		if err != nil {
			d.t.Fatal(err)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := suite.Client.List(d.ctx, list, client.InNamespace(d.req.Namespace)); err != nil {
			d.t.Fatal(err)
		}
		for _, item := range list.Items {
			if ref := metav1.GetControllerOf(&item); ref != nil && ref.Name == d.req.Name && ref.Kind == ownerGVK.Kind {
				found = append(found, gvk.Kind+" "+item.GetName())
			}
		}
	}
	slices.Sort(rendered)
	slices.Sort(found)
	if !slices.Equal(rendered, found) {
		d.t.Fatalf("the owner controls %q, its render in the test holds %q", found, rendered)
	}
}

// sync waits until the manager's cache holds the owner and its children as
// the API server does.
func (d *drifter) sync() {
	d.t.Helper()
	objs := []client.Object{d.o.obj}
	for _, c := range d.children {
		objs = append(objs, c)
	}
	testenv.Poll(d.t, 10*time.Millisecond, testenv.Timeout, "the cache to catch up", func() (bool, error) {
		for _, obj := range objs {
			gvk, err := apiutil.GVKForObject(obj, suite.Client.Scheme())
			if err != nil {
				return false, testenv.Unexpected("%v", err)
			}
			live, err := suite.Client.Scheme().New(gvk)
			if err != nil {
				return false, testenv.Unexpected("%v", err)
			}
			cached := live.DeepCopyObject().(client.Object)
			liveErr := suite.Client.Get(d.ctx, client.ObjectKeyFromObject(obj), live.(client.Object))
			cacheErr := suite.Manager.GetClient().Get(d.ctx, client.ObjectKeyFromObject(obj), cached)
			switch {
			case apierrors.IsNotFound(liveErr):
				if !apierrors.IsNotFound(cacheErr) {
					return false, cacheErr
				}
			case liveErr != nil:
				return false, liveErr
			case !cacheable(live.(client.Object)):
				if !apierrors.IsNotFound(cacheErr) {
					return false, cacheErr
				}
			case cacheErr != nil:
				return false, client.IgnoreNotFound(cacheErr)
			case cached.GetResourceVersion() != live.(client.Object).GetResourceVersion():
				return false, nil
			}
		}
		return true, nil
	})
}

// cacheable reports whether the manager's cache holds obj (manager.CacheOptions).
func cacheable(obj client.Object) bool {
	switch obj.(type) {
	case *corev1.Secret:
		_, ok := obj.GetLabels()[names.XDSSecretLabel]
		return ok
	case *examplev1.Envoy, *samplev1alpha1.Foo, *watchv1alpha1.Watcher, *gwv1.Gateway:
		return true
	}
	return obj.GetLabels()[names.ManagedByLabel] == names.ManagedByValue
}

// live reads child as the API server holds it.
func (d *drifter) live(child *unstructured.Unstructured) *unstructured.Unstructured {
	d.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(child.GroupVersionKind())
	if err := suite.Client.Get(d.ctx, client.ObjectKeyFromObject(child), u); err != nil {
		d.t.Fatal(err)
	}
	return u
}

// resourcePath is the path of child's writes, as the counter sees them.
func resourcePath(t *testing.T, child *unstructured.Unstructured) string {
	gvk := child.GroupVersionKind()
	m, err := suite.Manager.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "/apis/" + gvk.GroupVersion().String()
	if gvk.Group == "" {
		prefix = "/api/" + gvk.Version
	}
	return prefix + "/namespaces/" + child.GetNamespace() + "/" + m.Resource.Resource
}

// driftSet edits each field that child sets, one at a time, and checks
// that one reconcile puts it back with one write and that the next writes
// nothing. It returns how many fields it edited.
func (d *drifter) driftSet(child *unstructured.Unstructured, used map[string]bool) int {
	t := d.t
	kind := child.GetKind()
	var edited int
	for _, l := range leaves(child.Object) {
		if reason := match(excluded, kind, l.path); reason != "" {
			used["excluded "+reason] = true
			continue
		}
		// The render of now: a certificate issued anew brings a new key.
		l.value, _ = at(child.Object, l.path)
		edited++
		live := d.live(child)
		if got, ok := at(live.Object, l.path); !ok || !same(got, l.value) {
			t.Errorf("%s: the settled object holds %v, the render %v", format(l.path), got, l.value)
			continue
		}
		drifted := different(kind, l.path, l.value)
		set(live.Object, l.path, drifted)
		if err := suite.Client.Update(d.ctx, live); err != nil {
			t.Errorf("%s: the API server refuses %v in place of %v: %v (list the field in excluded, with the reason)", format(l.path), drifted, l.value, err)
			continue
		}
		writes := d.reconcile()
		want := []string{"PUT " + resourcePath(t, child) + "/" + child.GetName()}
		if reason := match(extraWrites, kind, l.path); reason != "" {
			used["extra "+reason] = true
			want = append([]string{"POST " + resourcePath(t, child)}, want...)
		}
		if !slices.Equal(writes, want) {
			t.Errorf("%s: %v in place of %v: the reconcile sent %q, want %q", format(l.path), drifted, l.value, writes, want)
		}
		got, _ := at(d.live(child).Object, l.path)
		wantValue := l.value
		if reason := match(reissued, kind, l.path); reason != "" {
			used["reissued "+reason] = true
			d.rerender(child)
			wantValue, _ = at(child.Object, l.path)
			if same(got, drifted) {
				t.Errorf("%s: the edit %v was kept", format(l.path), drifted)
			}
		}
		if !same(got, wantValue) {
			t.Errorf("%s: %v in place of %v: the reconcile left %v", format(l.path), drifted, l.value, got)
		}
		if w := d.reconcile(); len(w) != 0 {
			t.Errorf("%s: after putting it back, the next reconcile sent %q", format(l.path), w)
		}
	}
	return edited
}

// rerender sets child to its render of now.
func (d *drifter) rerender(child *unstructured.Unstructured) {
	for _, c := range d.render() {
		if c.GetKind() == child.GetKind() && c.GetName() == child.GetName() {
			*child = *c
		}
	}
}

// driftUnset edits each field of child that its render leaves unset, and
// adds a label and an annotation wherever it sets some, one at a time, and
// checks that one reconcile writes nothing. The edits stay. It returns how
// many fields it edited.
func (d *drifter) driftUnset(child *unstructured.Unstructured, used map[string]bool) int {
	t := d.t
	kind := child.GetKind()
	setPaths := map[string]bool{}
	for _, l := range leaves(child.Object) {
		// An empty struct sets nothing under it.
		if m, ok := l.value.(map[string]any); !ok || len(m) > 0 {
			setPaths[format(l.path)] = true
		}
	}
	var edits []leaf
	for _, l := range leaves(d.live(child).Object) {
		if setUnder(setPaths, l.path) {
			continue
		}
		if reason := match(unsetExcluded, kind, l.path); reason != "" {
			used["unset "+reason] = true
			continue
		}
		edits = append(edits, leaf{path: l.path, value: different(kind, l.path, l.value)})
	}
	for _, m := range []string{"metadata", "spec.template.metadata"} {
		path := strings.Split(m, ".")
		if _, ok := at(child.Object, toPath(path)); !ok {
			continue
		}
		for _, field := range []string{"labels", "annotations"} {
			edits = append(edits, leaf{path: toPath(append(path, field, "others.example.com/"+field)), value: "theirs"})
		}
	}
	for _, e := range edits {
		live := d.live(child)
		set(live.Object, e.path, e.value)
		if err := suite.Client.Update(d.ctx, live); err != nil {
			t.Errorf("unset %s: the API server refuses %v: %v (list the field in unsetExcluded, with the reason)", format(e.path), e.value, err)
			continue
		}
		if w := d.reconcile(); len(w) != 0 {
			t.Errorf("unset %s: %v: the reconcile sent %q, want none", format(e.path), e.value, w)
		}
	}
	return len(edits)
}

// setUnder reports whether path is a field the render sets, or lies under one.
func setUnder(set map[string]bool, path []any) bool {
	for i := len(path); i > 0; i-- {
		if set[format(path[:i])] {
			return true
		}
	}
	return false
}

func toPath(fields []string) []any {
	out := make([]any, len(fields))
	for i, f := range fields {
		out[i] = f
	}
	return out
}

// leaf is a field of an object in its JSON form: a value that is no map
// or list, or an empty map or list. Fields that are null are unset.
type leaf struct {
	path  []any
	value any
}

func leaves(v any) []leaf {
	var out []leaf
	var walk func(path []any, v any)
	walk = func(path []any, v any) {
		switch t := v.(type) {
		case nil:
		case map[string]any:
			if len(t) == 0 {
				out = append(out, leaf{slices.Clone(path), t})
			}
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(append(path, k), t[k])
			}
		case []any:
			if len(t) == 0 {
				out = append(out, leaf{slices.Clone(path), t})
			}
			for i, item := range t {
				walk(append(path, i), item)
			}
		default:
			out = append(out, leaf{slices.Clone(path), t})
		}
	}
	walk(nil, v)
	return out
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// format writes path as spec.template.spec.containers[0].name, with map
// keys that are no identifiers quoted: metadata.labels["app.kubernetes.io/name"].
func format(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		case string:
			if !identifier.MatchString(p) {
				fmt.Fprintf(&b, "[%q]", p)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

var index = regexp.MustCompile(`\[[0-9]+\]`)

// match returns "kind path" of the entry of table that holds path (the
// field, or one above it; list indices as [*]) for kind or for every kind,
// or "".
func match(table map[string]map[string]string, kind string, path []any) string {
	for _, k := range []string{kind, ""} {
		if p := matchPath(table[k], path); p != "" {
			return k + " " + p
		}
	}
	return ""
}

func matchPath(table map[string]string, path []any) string {
	generic := index.ReplaceAllString(format(path), "[*]")
	for p := range table {
		if generic == p || strings.HasPrefix(generic, p+".") || strings.HasPrefix(generic, p+"[") {
			return p
		}
	}
	return ""
}

// at returns the value at path in obj.
func at(obj any, path []any) (any, bool) {
	v := obj
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[p]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || p >= len(l) {
				return nil, false
			}
			v = l[p]
		}
	}
	return v, true
}

// removed, as a value, removes the field.
type removed struct{}

// set sets the value at path in obj, making the maps on the way.
func set(obj map[string]any, path []any, value any) {
	var v any = obj
	for i, p := range path {
		last := i == len(path)-1
		switch p := p.(type) {
		case string:
			m := v.(map[string]any)
			if last {
				if _, ok := value.(removed); ok {
					delete(m, p)
				} else {
					m[p] = value
				}
				return
			}
			if m[p] == nil {
				m[p] = map[string]any{}
			}
			v = m[p]
		case int:
			l := v.([]any)
			if last {
				l[p] = value
				return
			}
			v = l[p]
		}
	}
}

// same compares two JSON values, numbers by value.
func same(a, b any) bool {
	return reflect.DeepEqual(number(a), number(b))
}

func number(v any) any {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v
}

// alternatives are the values the API server admits in place of the
// values of enumerations that the renders set or it defaults.
var alternatives = map[string]string{
	"TCP":                "UDP",
	"UDP":                "SCTP",
	"NotIn":              "In",
	"Egress":             "Ingress",
	"ClusterIP":          "NodePort",
	"NodePort":           "LoadBalancer",
	"RuntimeDefault":     "Unconfined",
	"AlwaysAllow":        "IfHealthyBudget",
	"DoNotSchedule":      "ScheduleAnyway",
	"metadata.name":      "metadata.uid",
	"metadata.namespace": "metadata.uid",
	"IfNotPresent":       "Always",
	"Always":             "IfNotPresent",
	"File":               "FallbackToLogsOnError",
	"ClusterFirst":       "Default",
	"RollingUpdate":      "Recreate",
	"Cluster":            "Local",
	"None":               "ClientIP",
	"SingleStack":        "PreferDualStack",
	"HTTP":               "HTTPS",
	"Max":                "Min",
	"Percent":            "Pods",
	"Honor":              "Ignore",
	"Ignore":             "Honor",
	"default-scheduler":  "other-scheduler",
}

// different returns a value other than v, of its kind, that the API server
// is likely to admit at path.
func different(kind string, path []any, v any) any {
	switch t := v.(type) {
	case bool:
		return !t
	case int64:
		return t + 1
	case float64:
		return t + 1
	case map[string]any, []any:
		return removed{}
	case string:
		generic := index.ReplaceAllString(format(path), "[*]")
		if (kind == "Secret" && strings.HasPrefix(generic, "data")) || strings.HasPrefix(generic, "binaryData") {
			// Other content altogether: a PEM block followed or preceded
			// by other bytes is still the same certificate.
			b, _ := base64.StdEncoding.DecodeString(t)
			return base64.StdEncoding.EncodeToString(append([]byte("drift-"), byte(len(b))))
		}
		if alt, ok := alternatives[t]; ok {
			return alt
		}
		if p, err := netip.ParsePrefix(t); err == nil {
			// Another range of the same family: one bit longer, or shorter.
			bits := p.Bits() + 1
			if bits > p.Addr().BitLen() {
				bits = p.Bits() - 1
			}
			return netip.PrefixFrom(p.Addr(), bits).Masked().String()
		}
		if n, ok := strings.CutSuffix(t, "%"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				return strconv.Itoa(i+1) + "%"
			}
		}
		if t != "" && t[0] >= '0' && t[0] <= '9' {
			if q, err := resource.ParseQuantity(t); err == nil {
				q.Add(resource.MustParse("1"))
				return q.String()
			}
		}
		return t + "x"
	}
	panic(fmt.Sprintf("%s: a value of type %T", format(path), v))
}
