//go:build chaos

package chaos

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	injector "github.com/kube-envoy-controller/kube-envoy-controller/internal/webhook/inject"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// The chaos runs in two namespaces: nsPlain holds what the kube controllers
// turn into pods (Envoy and Foo Deployments, FooBar Jobs), out of the
// injection webhook's scope, so that the webhook's outages cost only our own
// pods; nsInjected holds the Watchers and the PodSets, whose pods the
// webhook injects.
const (
	nsPlain    = "chaos"
	nsInjected = "chaos-injected"
)

// podSetLabel marks the PodSets' pods, which the Watcher "audit" selects.
const podSetLabel = "chaos.kube-envoy-controller.io/podset"

// objectsOfEveryKind returns the objects the chaos runs against: two or
// three of every kind.
func objectsOfEveryKind() []client.Object {
	cluster := func(name string) runtime.RawExtension {
		return runtime.RawExtension{Raw: []byte(`{"name":"` + name + `","type":"EDS","connect_timeout":"1s",` +
			`"eds_cluster_config":{"eds_config":{"ads":{},"resource_api_version":"V3"}}}`)}
	}
	envoy := func(name string, replicas int32) *examplev1.Envoy {
		return &examplev1.Envoy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsPlain},
			Spec:       examplev1.EnvoySpec{Replicas: ptr.To(replicas)},
		}
	}
	config := func(name, envoy string) *examplev1.EnvoyConfig {
		return &examplev1.EnvoyConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsPlain},
			Spec:       examplev1.EnvoyConfigSpec{EnvoyRef: envoy, Resources: examplev1.EnvoyResources{Clusters: []runtime.RawExtension{cluster(name)}}},
		}
	}
	foo := func(name string) *samplev1alpha1.Foo {
		return &samplev1alpha1.Foo{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsPlain},
			Spec:       samplev1alpha1.FooSpec{DeploymentName: name, Replicas: ptr.To[int32](1)},
		}
	}
	fooBar := func(name string) *k8sv1.FooBar {
		return &k8sv1.FooBar{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsPlain},
			Spec:       k8sv1.FooBarSpec{Command: "echo " + name, Foo: "1"},
		}
	}
	watcher := func(name string, selector *metav1.LabelSelector) *watchv1alpha1.Watcher {
		return &watchv1alpha1.Watcher{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsInjected},
			Spec: watchv1alpha1.WatcherSpec{
				Container:  corev1.Container{Name: name, Image: "busybox:1.37", Command: []string{"sleep", "3600"}},
				ConfigData: map[string]string{"LOG_LEVEL": "info"},
				Selector:   selector,
			},
		}
	}
	podSet := func(name string, replicas int32) *demov1alpha1.PodSet {
		return &demov1alpha1.PodSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsInjected},
			Spec: demov1alpha1.PodSetSpec{Replicas: replicas, Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{podSetLabel: name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.37", Command: []string{"sleep", "3600"}}}},
			}},
		}
	}
	return []client.Object{
		envoy("edge-a", 1), envoy("edge-b", 2), envoy(rejectingEnvoy, 1),
		config("routes-a", "edge-a"), config("routes-b", "edge-b"), config(rejectingConfig, rejectingEnvoy),
		foo("web-a"), foo("web-b"),
		fooBar("job-a"), fooBar("job-b"),
		watcher("logs", nil),
		watcher("audit", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: podSetLabel, Operator: metav1.LabelSelectorOpExists}}}),
		podSet("set-a", 3), podSet("set-b", 2),
	}
}

// namespaces returns the chaos namespaces: nsInjected in the webhook's
// scope, where the Watcher "audit" may inject by selector.
func namespaces() []*corev1.Namespace {
	return []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: nsPlain}},
		{ObjectMeta: metav1.ObjectMeta{
			Name:        nsInjected,
			Labels:      map[string]string{injector.NamespaceLabel: injector.NamespaceEnabled},
			Annotations: map[string]string{injector.SelectorWatchersAnnotation: "audit"},
		}},
	}
}

// child is what the chaos remembers of a child object once everything
// converged: the operator must bring it back to this.
type child struct {
	obj         client.Object // as it was, a Deployment, Service, ConfigMap or Secret
	owner       string        // its controller's kind/name
	fingerprint string        // the fields the operator sets that the chaos edits
}

func (c child) String() string {
	return fmt.Sprintf("%T %s/%s", c.obj, c.obj.GetNamespace(), c.obj.GetName())
}

// fingerprint is the JSON of the fields of a child that the operator sets
// and the chaos edits.
func fingerprint(obj client.Object) string {
	var v any
	switch o := obj.(type) {
	case *appsv1.Deployment:
		var images []string
		for _, c := range o.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
		v = []any{o.Spec.Replicas, images, o.Spec.Template.Spec.AutomountServiceAccountToken}
	case *corev1.Service:
		v = o.Spec.Ports
	case *corev1.ConfigMap:
		v = []any{o.Data, o.BinaryData}
	case *corev1.Secret:
		// A fleet's client certificate is issued anew when repaired: what
		// must come back is a certificate of the fleet's identity, with its
		// key and the CAs.
		v = []any{certificateIdentity(o.Data[proxy.ClientCertFile]), len(o.Data[proxy.ClientKeyFile]) > 0, len(o.Data[proxy.TrustedCAFile]) > 0}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// children lists the operator's Deployments, Services, ConfigMaps and
// Secrets (the fleets' client certificates) in the chaos namespaces.
func children(ctx context.Context, c client.Client) ([]child, error) {
	var out []child
	for _, ns := range []string{nsPlain, nsInjected} {
		for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}} {
			if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{names.ManagedByLabel: names.ManagedByValue}); err != nil {
				return nil, err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			for _, item := range items {
				obj := item.(client.Object)
				ref := metav1.GetControllerOf(obj)
				if ref == nil || obj.GetDeletionTimestamp() != nil {
					continue
				}
				out = append(out, child{obj: obj, owner: ref.Kind + "/" + ref.Name, fingerprint: fingerprint(obj)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// notReady returns what is not as it should be: objects whose status does
// not say Ready for their current generation, children missing or changed
// since snapshot, PodSets without their pods, a webhook that does not
// inject, fleets' histories and replicas' reports in opNS (the operator's
// namespace) missing or unreadable. Empty means converged.
func notReady(ctx context.Context, c client.Client, opNS string, want []client.Object, snapshot []child) ([]string, error) {
	var out []string
	amiss, err := controlPlaneNotReady(ctx, c, opNS, want)
	if err != nil {
		return nil, err
	}
	out = append(out, amiss...)
	for _, w := range want {
		obj := w.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(w), obj); err != nil {
			return nil, err
		}
		if why := objectNotReady(obj); why != "" {
			out = append(out, fmt.Sprintf("%T %s: %s", obj, obj.GetName(), why))
		}
		if ps, ok := obj.(*demov1alpha1.PodSet); ok {
			pods, err := activePods(ctx, c, ps)
			if err != nil {
				return nil, err
			}
			if len(pods) != int(ps.Spec.Replicas) {
				out = append(out, fmt.Sprintf("PodSet %s: %d pods, want %d", ps.Name, len(pods), ps.Spec.Replicas))
			}
		}
	}
	if snapshot != nil {
		now, err := children(ctx, c)
		if err != nil {
			return nil, err
		}
		for _, s := range snapshot {
			i := slices.IndexFunc(now, func(n child) bool { return n.String() == s.String() })
			switch {
			case i < 0:
				out = append(out, s.String()+": missing")
			case now[i].owner != s.owner || now[i].fingerprint != s.fingerprint:
				out = append(out, s.String()+": not as the operator sets it")
			}
		}
	}
	if why, err := webhookNotReady(ctx, c); err != nil {
		return nil, err
	} else if why != "" {
		out = append(out, why)
	}
	return out, nil
}

// objectNotReady says why obj's status does not report it ready for its
// current generation, or "".
func objectNotReady(obj client.Object) string {
	type conditioned interface{ GetConditions() []metav1.Condition }
	conds := obj.(conditioned).GetConditions()
	if len(conds) == 0 {
		return "no conditions"
	}
	for _, c := range conds {
		if c.ObservedGeneration != obj.GetGeneration() {
			return fmt.Sprintf("condition %s describes generation %d, not %d", c.Type, c.ObservedGeneration, obj.GetGeneration())
		}
	}
	if ec, ok := obj.(*examplev1.EnvoyConfig); ok && ec.Name == rejectingConfig {
		// Every proxy rejected its content: it stays so, and says so. Its
		// change is withheld (recorded in the fleet's history); once the
		// history is lost, the fleet is held on the rejection its status
		// records instead.
		p := meta.FindStatusCondition(conds, examplev1.EnvoyConfigConditionPublished)
		a := meta.FindStatusCondition(conds, examplev1.EnvoyConfigConditionAccepted)
		withheld := a != nil && a.Status == metav1.ConditionFalse && a.Reason == examplev1.EnvoyConfigReasonWithheld
		held := a != nil && a.Status == metav1.ConditionTrue &&
			p != nil && (p.Reason == examplev1.EnvoyConfigReasonRolledBack || p.Reason == examplev1.EnvoyConfigReasonRejected)
		if p == nil || p.Status != metav1.ConditionFalse || !withheld && !held || len(ec.Status.RejectedVersions) == 0 {
			return fmt.Sprintf("not reported rejected: Accepted %+v, Published %+v, rejectedVersions %v", a, p, ec.Status.RejectedVersions)
		}
		return ""
	}
	if conditions.IsTrue(conds, conditions.Degraded) {
		return "Degraded: " + meta.FindStatusCondition(conds, conditions.Degraded).Message
	}
	need := func(typ string) string {
		if !conditions.IsTrue(conds, typ) {
			if c := meta.FindStatusCondition(conds, typ); c != nil {
				return typ + " " + string(c.Status) + ": " + c.Message
			}
			return "no " + typ
		}
		return ""
	}
	// A workload is ready once its Deployment is rolled out, and no pod of
	// an earlier one is left: until then, its status still has changes to
	// report.
	rolledOut := func() string {
		if c := meta.FindStatusCondition(conds, conditions.Progressing); c == nil || c.Status != metav1.ConditionFalse || c.Reason != conditions.RolledOut {
			return "not rolled out"
		}
		return ""
	}
	switch o := obj.(type) {
	case *examplev1.Envoy:
		want := ptr.Deref(o.Spec.Replicas, 1)
		if s := o.Status; s.Replicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want {
			return fmt.Sprintf("%d proxies, %d ready, %d available, of %d", s.Replicas, s.ReadyReplicas, s.AvailableReplicas, want)
		}
		return need(examplev1.EnvoyConditionAvailable) + rolledOut()
	case *examplev1.EnvoyConfig:
		return need(examplev1.EnvoyConfigConditionAccepted) + need(examplev1.EnvoyConfigConditionPublished)
	case *samplev1alpha1.Foo:
		return need(samplev1alpha1.FooConditionAvailable) + rolledOut()
	case *watchv1alpha1.Watcher:
		return need(watchv1alpha1.WatcherConditionReady)
	case *demov1alpha1.PodSet:
		if o.Status.ReadyReplicas != o.Spec.Replicas || o.Status.Replicas != o.Spec.Replicas {
			return fmt.Sprintf("%d pods, %d ready, of %d", o.Status.Replicas, o.Status.ReadyReplicas, o.Spec.Replicas)
		}
		return need(demov1alpha1.PodSetConditionAvailable)
	case *k8sv1.FooBar:
		// The run ended: as it should, or lost to the chaos (a Job deleted
		// before its outcome was recorded), which is never run again.
		if o.Status.Phase != k8sv1.PhaseSucceeded && conditions.Reason(conds, k8sv1.FooBarConditionComplete) != k8sv1.FooBarReasonJobLost {
			return "phase " + string(o.Status.Phase)
		}
		return need(k8sv1.FooBarConditionComplete)
	}
	return "unknown kind"
}

// activePods returns the pods that count towards ps's replicas: controlled
// by it, not being deleted, not finished.
func activePods(ctx context.Context, c client.Client, ps *demov1alpha1.PodSet) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ps.Namespace), client.MatchingLabels{podSetLabel: ps.Name}); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if metav1.IsControlledBy(&p, ps) && p.DeletionTimestamp == nil &&
			p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out, nil
}

// Webhook configurations the operator keeps the caBundle of.
const (
	injectorConfig  = "kube-envoy-controller-injector"
	validatorConfig = "kube-envoy-controller-validator"
)

// webhookNotReady says why the webhooks do not serve, or "": both
// configurations carry a CA, and a pod created (in a dry run) in nsInjected
// comes back with the sidecar it names.
func webhookNotReady(ctx context.Context, c client.Client) (string, error) {
	m := &admissionv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: injectorConfig}, m); err != nil {
		return "", err
	}
	v := &admissionv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: validatorConfig}, v); err != nil {
		return "", err
	}
	for _, h := range m.Webhooks {
		if len(h.ClientConfig.CABundle) == 0 {
			return "the injector's configuration has no caBundle", nil
		}
	}
	for _, h := range v.Webhooks {
		if len(h.ClientConfig.CABundle) == 0 {
			return "the validator's configuration has no caBundle", nil
		}
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: nsInjected, Annotations: map[string]string{injector.InjectAnnotation: "logs"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "busybox:1.37"}}},
	}
	if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
		return "the injector refuses a pod: " + err.Error(), nil
	}
	var names []string
	for _, ctr := range probe.Spec.Containers {
		names = append(names, ctr.Name)
	}
	if got := strings.Join(names, ","); got != "probe,logs" {
		return "the injector gave a pod the containers " + got, nil
	}
	return "", nil
}

// certificateIdentity is the URI of the PEM certificate cert (a fleet's
// SPIFFE identity), or why there is none.
func certificateIdentity(cert []byte) string {
	block, _ := pem.Decode(cert)
	if block == nil {
		return "no PEM certificate"
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err.Error()
	}
	var uris []string
	for _, u := range c.URIs {
		uris = append(uris, u.String())
	}
	return strings.Join(uris, ",")
}

// controlPlaneNotReady says what is amiss with the control plane's records
// in opNS, the operator's namespace: every fleet of want's EnvoyConfigs has
// a history that reads back, which serves the version its EnvoyConfigs
// report, and never a version they report rejected; every shard of a
// replica's report reads back, and there is one.
func controlPlaneNotReady(ctx context.Context, c client.Client, opNS string, want []client.Object) ([]string, error) {
	var out []string
	for _, w := range want {
		ec, ok := w.(*examplev1.EnvoyConfig)
		if !ok {
			continue
		}
		live := &examplev1.EnvoyConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ec), live); err != nil {
			return nil, err
		}
		id := fleet.ID{Namespace: ec.Namespace, Name: ec.Spec.EnvoyRef}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: history.Name(id)}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				out = append(out, "the history of fleet "+id.String()+": missing")
				continue
			}
			return nil, err
		}
		h, err := history.Read(cm, opNS, id)
		switch {
		case err != nil:
			out = append(out, "the history of fleet "+id.String()+": "+err.Error())
		case slices.Contains(live.Status.RejectedVersions, h.Current):
			out = append(out, fmt.Sprintf("the history of fleet %s serves the rejected version %s", id, h.Current))
		case h.Current != live.Status.PublishedVersion:
			out = append(out, fmt.Sprintf("the history of fleet %s serves %q, its EnvoyConfig reports %q", id, h.Current, live.Status.PublishedVersion))
		}
	}
	var reports corev1.ConfigMapList
	if err := c.List(ctx, &reports, client.InNamespace(opNS), client.MatchingLabels{names.ComponentLabel: report.Component}); err != nil {
		return nil, err
	}
	if len(reports.Items) == 0 {
		out = append(out, "no replica's report")
	}
	for i := range reports.Items {
		if _, err := report.Read(&reports.Items[i]); err != nil {
			out = append(out, "a replica's report: "+err.Error())
		}
	}
	return out, nil
}
