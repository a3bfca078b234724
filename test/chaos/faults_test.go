//go:build chaos

package chaos

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/report"
)

// run is what the faults act on.
type run struct {
	t        *testing.T
	c        client.Client
	rnd      *rand.Rand
	op       *operator
	opNS     string // the operator's namespace
	proxy    *rejectingProxy
	cluster  cluster
	objects  []client.Object
	snapshot []child
}

// fault is one kind of fault. inject does it once and returns what it did
// and the writes the operator needs to repair it (see budget); ok is false
// when there was nothing to do it to. A fault with a spacing is injected at
// most once in that time.
type fault struct {
	name    string
	inject  func(ctx context.Context, r *run) (what string, need int, ok bool, err error)
	spacing time.Duration
}

// apiServerSpacing spaces kube-apiserver's restarts. Every client's
// informers (the operator's, kube-controller-manager's, kwok's) back off
// before they watch again, by up to twice a delay that doubles with each
// failure, from 0.8 s to 30 s, and is reset only after two quiet minutes
// (client-go's reflector). Restarts every few seconds would measure that
// backoff, a minute long, more than the operator.
const apiServerSpacing = 20 * time.Second

// Each fault's need is the writes a perfect operator sends to the chaos
// namespaces to repair it: the children it writes again, the event that
// reports them, and the status writes that follow what the kube
// controllers report of a workload it recreated. The bound the chaos
// checks is the sum of the needs plus slack per fault (budget).
var faults = []fault{
	{"delete a Deployment", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool { _, ok := c.obj.(*appsv1.Deployment); return ok })
		if !ok {
			return "", 0, false, nil
		}
		// Created again (1) and reported (1); the owner's status follows it
		// from missing to each replica available.
		need := 2 + 2 + int(ptr.Deref(c.obj.(*appsv1.Deployment).Spec.Replicas, 1))
		return "deleted " + c.String(), need, true, r.delete(ctx, c.obj)
	}, 0},
	{"edit a Deployment", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool { _, ok := c.obj.(*appsv1.Deployment); return ok })
		if !ok {
			return "", 0, false, nil
		}
		// Updated back (1) and reported (1); the owner's status may follow
		// the rollout that the edit started, and its end.
		return "edited the image of " + c.String(), 4, true, r.patch(ctx, c.obj,
			`{"spec":{"template":{"spec":{"containers":[{"name":"`+c.obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Name+`","image":"chaos/edited:1"}]}}}}`)
	}, 0},
	{"zero a Deployment's replicas", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool {
			d, ok := c.obj.(*appsv1.Deployment)
			return ok && ptr.Deref(d.Spec.Replicas, 1) > 0
		})
		if !ok {
			return "", 0, false, nil
		}
		// A zero value the operator sets otherwise: updated back (1) and
		// reported (1); the owner's status follows the replicas down and
		// up again.
		need := 2 + 2 + 2*int(ptr.Deref(c.obj.(*appsv1.Deployment).Spec.Replicas, 1))
		return "set the replicas of " + c.String() + " to 0", need, true, r.patch(ctx, c.obj, `{"spec":{"replicas":0}}`)
	}, 0},
	{"mount the API token in a proxy", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool {
			d, ok := c.obj.(*appsv1.Deployment)
			return ok && d.Spec.Template.Spec.AutomountServiceAccountToken != nil && !*d.Spec.Template.Spec.AutomountServiceAccountToken
		})
		if !ok {
			return "", 0, false, nil
		}
		// The operator sets the false that this edit turns true: updated
		// back (1) and reported (1); the owner's status may follow the two
		// rollouts.
		need := 4 + int(ptr.Deref(c.obj.(*appsv1.Deployment).Spec.Replicas, 1))
		return "mounted the API token in the proxies of " + c.String(), need, true,
			r.patch(ctx, c.obj, `{"spec":{"template":{"spec":{"automountServiceAccountToken":true}}}}`)
	}, 0},
	{"delete a Service", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool { _, ok := c.obj.(*corev1.Service); return ok })
		if !ok {
			return "", 0, false, nil
		}
		return "deleted " + c.String(), 2, true, r.delete(ctx, c.obj)
	}, 0},
	{"edit a Service", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool { _, ok := c.obj.(*corev1.Service); return ok })
		if !ok {
			return "", 0, false, nil
		}
		// A merge patch replaces the list: one port, elsewhere.
		return "moved the ports of " + c.String(), 2, true, r.patch(ctx, c.obj, `{"spec":{"ports":[{"name":"chaos","port":9999}]}}`)
	}, 0},
	{"delete a ConfigMap", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool { _, ok := c.obj.(*corev1.ConfigMap); return ok })
		if !ok {
			return "", 0, false, nil
		}
		return "deleted " + c.String(), 2, true, r.delete(ctx, c.obj)
	}, 0},
	{"edit a ConfigMap", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool {
			cm, ok := c.obj.(*corev1.ConfigMap)
			return ok && len(cm.Data) > 0
		})
		if !ok {
			return "", 0, false, nil
		}
		var key string
		for k := range c.obj.(*corev1.ConfigMap).Data {
			key = k
			break
		}
		return "edited " + key + " of " + c.String(), 2, true, r.patch(ctx, c.obj, fmt.Sprintf(`{"data":{%q:"edited by the chaos"}}`, key))
	}, 0},
	{"delete a fleet's certificate Secret", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool { _, ok := c.obj.(*corev1.Secret); return ok })
		if !ok {
			return "", 0, false, nil
		}
		// Issued again (1) and reported (1).
		return "deleted " + c.String(), 2, true, r.delete(ctx, c.obj)
	}, 0},
	{"corrupt a fleet's certificate Secret", func(ctx context.Context, r *run) (string, int, bool, error) {
		c, ok := r.pickChild(func(c child) bool { _, ok := c.obj.(*corev1.Secret); return ok })
		if !ok {
			return "", 0, false, nil
		}
		// Issued again over it (1) and reported (1).
		return "replaced the certificate of " + c.String(), 2, true, r.patch(ctx, c.obj,
			fmt.Sprintf(`{"data":{%q:%q}}`, proxy.ClientCertFile, base64.StdEncoding.EncodeToString([]byte("edited by the chaos"))))
	}, 0},
	{"delete a PodSet's pods", func(ctx context.Context, r *run) (string, int, bool, error) {
		ps := r.pickObject(func(o client.Object) bool { _, ok := o.(*demov1alpha1.PodSet); return ok }).(*demov1alpha1.PodSet)
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil { // its UID owns the pods
			return "", 0, false, err
		}
		pods, err := activePods(ctx, r.c, ps)
		if err != nil || len(pods) == 0 {
			return "", 0, false, err
		}
		n := 1 + r.rnd.IntN(min(2, len(pods)))
		r.rnd.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
		for i := range n {
			if err := r.delete(ctx, &pods[i]); err != nil {
				return "", 0, false, err
			}
		}
		// Each pod created again (n), one event, and the status through the
		// pods gone, created and ready.
		return fmt.Sprintf("deleted %d pods of PodSet %s", n, ps.Name), n + 1 + 2*n + 1, true, nil
	}, 0},
	{"delete a FooBar's Job", func(ctx context.Context, r *run) (string, int, bool, error) {
		var jobs batchv1.JobList
		if err := r.c.List(ctx, &jobs, client.InNamespace(nsPlain), client.MatchingLabels{names.ManagedByLabel: names.ManagedByValue}); err != nil {
			return "", 0, false, err
		}
		if len(jobs.Items) == 0 {
			return "", 0, false, nil
		}
		j := &jobs.Items[r.rnd.IntN(len(jobs.Items))]
		// Never run again; a run whose outcome was not recorded yet is
		// reported lost (a status write and its event).
		return "deleted Job " + j.Name, 2, true, r.delete(ctx, j)
	}, 0},
	{"change a FooBar", func(ctx context.Context, r *run) (string, int, bool, error) {
		fb := r.pickObject(func(o client.Object) bool { _, ok := o.(*k8sv1.FooBar); return ok })
		// A new generation: the dry run, the start recorded, the Job
		// created and its event, the previous Job deleted and its event,
		// the run's progress (Running, Succeeded) and its event.
		return "changed FooBar " + fb.GetName(), 9, true, r.patch(ctx, fb, `{"spec":{"foo":"`+strconv.Itoa(r.rnd.IntN(1<<30))+`"}}`)
	}, 0},
	{"clear the webhooks' caBundle", func(ctx context.Context, r *run) (string, int, bool, error) {
		clear := func(obj client.Object, hooks func() []*admissionv1.WebhookClientConfig) error {
			// The operator may be writing the CA back from an earlier fault.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := r.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return err
				}
				for _, cc := range hooks() {
					cc.CABundle = nil
				}
				return r.c.Update(ctx, obj)
			})
		}
		m := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: injectorConfig}}
		v := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validatorConfig}}
		if err := clear(m, func() (out []*admissionv1.WebhookClientConfig) {
			for i := range m.Webhooks {
				out = append(out, &m.Webhooks[i].ClientConfig)
			}
			return out
		}); err != nil {
			return "", 0, false, err
		}
		// The operator writes the CA back into both.
		return "cleared the caBundle of both webhook configurations", 2, true, clear(v, func() (out []*admissionv1.WebhookClientConfig) {
			for i := range v.Webhooks {
				out = append(out, &v.Webhooks[i].ClientConfig)
			}
			return out
		})
	}, 0},
	{"delete a fleet's history", func(ctx context.Context, r *run) (string, int, bool, error) {
		cm, ok, err := r.pickControlPlane(ctx, history.Component)
		if !ok || err != nil {
			return "", 0, false, err
		}
		// Recorded again (1). The fleet whose content was rejected is then
		// served nothing: its EnvoyConfig's status says so (1), and the
		// replica's report drops its proxy (1).
		return "deleted the history of fleet " + cm.Annotations[history.FleetAnnotation], 3, true, r.delete(ctx, cm)
	}, 0},
	{"corrupt a fleet's history", func(ctx context.Context, r *run) (string, int, bool, error) {
		cm, ok, err := r.pickControlPlane(ctx, history.Component)
		if !ok || err != nil {
			return "", 0, false, err
		}
		var key string
		for k := range cm.BinaryData {
			key = k
		}
		// As deleted, but written over.
		return "corrupted the history of fleet " + cm.Annotations[history.FleetAnnotation], 3, true, r.patch(ctx, cm,
			fmt.Sprintf(`{"binaryData":{%q:%q}}`, key, base64.StdEncoding.EncodeToString([]byte("edited by the chaos"))))
	}, 0},
	{"delete a replica's report", func(ctx context.Context, r *run) (string, int, bool, error) {
		cm, ok, err := r.pickControlPlane(ctx, report.Component)
		if !ok || err != nil {
			return "", 0, false, err
		}
		// Written again (1); meanwhile the leader counts none of the
		// replica's proxies, and the EnvoyConfigs' status follows (2).
		return "deleted the report " + cm.Name, 3, true, r.delete(ctx, cm)
	}, 0},
	{"corrupt a replica's report", func(ctx context.Context, r *run) (string, int, bool, error) {
		cm, ok, err := r.pickControlPlane(ctx, report.Component)
		if !ok || err != nil {
			return "", 0, false, err
		}
		var key string
		for k := range cm.Data {
			key = k
		}
		return "corrupted the report " + cm.Name, 3, true, r.patch(ctx, cm, fmt.Sprintf(`{"data":{%q:"edited by the chaos"}}`, key))
	}, 0},
	{"SIGKILL the operator", func(ctx context.Context, r *run) (string, int, bool, error) {
		r.op.kill(r.t)
		r.op.start(r.t)
		// The restarted replica writes its report afresh, without the proxy
		// of the rejecting fleet, which connects again, and is counted (2);
		// the EnvoyConfig's status follows (2).
		return "SIGKILLed the operator and started it again", 4, true, nil
	}, 0},
	{"restart kube-apiserver", func(ctx context.Context, r *run) (string, int, bool, error) {
		return "restarted kube-apiserver", 0, true, r.cluster.restart(ctx, "kube-apiserver")
	}, apiServerSpacing},
	{"restart etcd", func(ctx context.Context, r *run) (string, int, bool, error) {
		return "restarted etcd", 0, true, r.cluster.restart(ctx, "etcd")
	}, 0},
}

// slackPerFault is the writes each fault may cost beyond its need: a
// status written twice as two events race, a retry.
const slackPerFault = 3

// pickControlPlane returns one of the operator's ConfigMaps of component
// (names.ComponentLabel) in its namespace.
func (r *run) pickControlPlane(ctx context.Context, component string) (*corev1.ConfigMap, bool, error) {
	var list corev1.ConfigMapList
	if err := r.c.List(ctx, &list, client.InNamespace(r.opNS), client.MatchingLabels{names.ComponentLabel: component}); err != nil {
		return nil, false, err
	}
	if len(list.Items) == 0 {
		return nil, false, nil
	}
	return &list.Items[r.rnd.IntN(len(list.Items))], true, nil
}

func (r *run) pickChild(match func(child) bool) (child, bool) {
	var cands []child
	for _, c := range r.snapshot {
		if match(c) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return child{}, false
	}
	return cands[r.rnd.IntN(len(cands))], true
}

// pickObject returns a copy of one of the objects match selects, as created.
func (r *run) pickObject(match func(client.Object) bool) client.Object {
	var cands []client.Object
	for _, o := range r.objects {
		if match(o) {
			cands = append(cands, o)
		}
	}
	return cands[r.rnd.IntN(len(cands))].DeepCopyObject().(client.Object)
}

// delete deletes obj, whatever its version; one that is gone already was
// deleted by an earlier fault that the operator has not repaired yet.
func (r *run) delete(ctx context.Context, obj client.Object) error {
	err := r.c.Delete(ctx, obj.DeepCopyObject().(client.Object), client.PropagationPolicy(metav1.DeletePropagationBackground))
	return client.IgnoreNotFound(err)
}

// patch applies a JSON merge patch to obj.
func (r *run) patch(ctx context.Context, obj client.Object, merge string) error {
	err := r.c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(merge)))
	if apierrors.IsNotFound(err) {
		return nil // deleted by an earlier fault, not repaired yet
	}
	return err
}
