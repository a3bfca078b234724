//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
)

// The operator's status follows what the kube controllers and kwok report:
// a Foo's or an Envoy's its Deployment's, a PodSet's its pods', a FooBar's its
// Job's, an EnvoyConfig's the endpoints its fleet is sent. Once the operator's
// objects report ready, that world may still be moving: after kube-apiserver
// or etcd restarts, every client's informers wait, up to tens of seconds,
// before they watch again (see apiServerSpacing), and kube-controller-manager
// then catches up with what it missed (a Deployment's edit, a rollout's
// ReplicaSets and pods), rewriting statuses that the operator rightly
// follows. Its writes then are reactions, not a settled operator's noise. So
// the settled window starts only once the world has settled too
// (waitWorldSettled): it is consistent as the API server serves it, whatever
// a stale informer still believes, and has not changed for a quiet period.

// worldNotSettled says what the kube controllers and kwok still have to do
// in the chaos namespaces, as the API server serves them, and returns the
// resource versions of everything the operator's statuses follow, to tell
// whether it changed since. Empty means settled:
//   - no object is being deleted;
//   - every Deployment's status describes its current generation, and all its
//     replicas run its current template, are ready and available;
//   - every ReplicaSet's status describes its current generation; only its
//     Deployment's current revision has replicas, and as many pods, ready,
//     as it wants;
//   - the pods of ReplicaSets and PodSets run and are ready, a Job's have
//     finished;
//   - every Job has finished;
//   - every PodDisruptionBudget's status describes its current generation.
//
// An object whose controller is gone (orphan) is left out of these.
func worldNotSettled(ctx context.Context, c client.Client) (amiss []string, versions map[string]string, err error) {
	versions = map[string]string{}
	uids := map[types.UID]bool{} // the controllers that exist
	var (
		deps  []appsv1.Deployment
		sets  []appsv1.ReplicaSet
		pods  []corev1.Pod
		jobs  []batchv1.Job
		pdbs  []policyv1.PodDisruptionBudget
		owned = map[types.UID][]corev1.Pod{} // active pods by controller
	)
	for _, ns := range []string{nsPlain, nsInjected} {
		in := client.InNamespace(ns)
		var (
			dl  appsv1.DeploymentList
			rl  appsv1.ReplicaSetList
			pl  corev1.PodList
			jl  batchv1.JobList
			bl  policyv1.PodDisruptionBudgetList
			sl  discoveryv1.EndpointSliceList
			psl demov1alpha1.PodSetList
			fbl k8sv1.FooBarList
			el  examplev1.EnvoyList
			fl  samplev1alpha1.FooList
		)
		for _, l := range []client.ObjectList{&dl, &rl, &pl, &jl, &bl, &sl, &psl, &fbl, &el, &fl} {
			if err := c.List(ctx, l, in); err != nil {
				return nil, nil, err
			}
		}
		deps, sets, pods, jobs, pdbs = append(deps, dl.Items...), append(sets, rl.Items...), append(pods, pl.Items...), append(jobs, jl.Items...), append(pdbs, bl.Items...)
		for i := range dl.Items {
			uids[dl.Items[i].UID] = true
		}
		for i := range rl.Items {
			uids[rl.Items[i].UID] = true
		}
		for i := range jl.Items {
			uids[jl.Items[i].UID] = true
		}
		for i := range psl.Items {
			uids[psl.Items[i].UID] = true
		}
		for i := range fbl.Items {
			uids[fbl.Items[i].UID] = true
		}
		for i := range el.Items {
			uids[el.Items[i].UID] = true
		}
		for i := range fl.Items {
			uids[fl.Items[i].UID] = true
		}
		for i := range sl.Items {
			versions["EndpointSlice "+ns+"/"+sl.Items[i].Name] = sl.Items[i].ResourceVersion
		}
	}
	record := func(kind string, o metav1.Object) {
		versions[kind+" "+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	// orphan says whether o's controller is gone: it waits for the garbage
	// collector, and no status follows it any more (a controller that takes
	// the name again has another UID, and does not adopt it). Its deletion,
	// when it comes, is a change of the world like any other.
	orphan := func(o metav1.Object) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && !uids[ref.UID]
	}
	// deleting says whether o is being deleted, and adds why to amiss.
	deleting := func(kind string, o metav1.Object) bool {
		if o.GetDeletionTimestamp() == nil {
			return false
		}
		amiss = append(amiss, fmt.Sprintf("%s %s is being deleted", kind, o.GetName()))
		return true
	}
	for i := range pods {
		p := &pods[i]
		record("Pod", p)
		if deleting("Pod", p) || orphan(p) {
			continue
		}
		ref := metav1.GetControllerOf(p)
		finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		switch {
		case ref == nil:
		case ref.Kind == "Job":
			if !finished {
				amiss = append(amiss, fmt.Sprintf("Pod %s of Job %s: %s", p.Name, ref.Name, p.Status.Phase))
			}
		case !finished:
			owned[ref.UID] = append(owned[ref.UID], *p)
			if !podReady(p) {
				amiss = append(amiss, fmt.Sprintf("Pod %s of %s %s: %s, not ready", p.Name, ref.Kind, ref.Name, p.Status.Phase))
			}
		}
	}
	revision := map[types.UID]string{} // a Deployment's current revision
	for i := range deps {
		d := &deps[i]
		record("Deployment", d)
		revision[d.UID] = d.Annotations[revisionAnnotation]
		if deleting("Deployment", d) || orphan(d) {
			continue
		}
		s, want := d.Status, ptr.Deref(d.Spec.Replicas, 1)
		switch {
		case s.ObservedGeneration != d.Generation:
			amiss = append(amiss, fmt.Sprintf("Deployment %s: status of generation %d, not %d", d.Name, s.ObservedGeneration, d.Generation))
		case s.Replicas != want || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want || s.UnavailableReplicas != 0:
			amiss = append(amiss, fmt.Sprintf("Deployment %s: %d replicas, %d updated, %d ready, %d available, %d unavailable, of %d",
				d.Name, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas, want))
		}
	}
	for i := range sets {
		rs := &sets[i]
		record("ReplicaSet", rs)
		if deleting("ReplicaSet", rs) || orphan(rs) {
			continue
		}
		s, want := rs.Status, ptr.Deref(rs.Spec.Replicas, 1)
		if ref := metav1.GetControllerOf(rs); ref != nil && want > 0 && rs.Annotations[revisionAnnotation] != revision[ref.UID] {
			amiss = append(amiss, fmt.Sprintf("ReplicaSet %s: %d replicas at revision %s, its Deployment is at %s",
				rs.Name, want, rs.Annotations[revisionAnnotation], revision[ref.UID]))
		}
		switch n := int32(len(owned[rs.UID])); {
		case s.ObservedGeneration != rs.Generation:
			amiss = append(amiss, fmt.Sprintf("ReplicaSet %s: status of generation %d, not %d", rs.Name, s.ObservedGeneration, rs.Generation))
		case s.Replicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want || n != want:
			amiss = append(amiss, fmt.Sprintf("ReplicaSet %s: %d replicas, %d ready, %d available, %d pods, of %d",
				rs.Name, s.Replicas, s.ReadyReplicas, s.AvailableReplicas, n, want))
		}
	}
	for i := range jobs {
		j := &jobs[i]
		record("Job", j)
		if deleting("Job", j) || orphan(j) {
			continue
		}
		if !jobFinished(j) || j.Status.Active != 0 {
			amiss = append(amiss, fmt.Sprintf("Job %s: not finished, %d active", j.Name, j.Status.Active))
		}
	}
	for i := range pdbs {
		b := &pdbs[i]
		record("PodDisruptionBudget", b)
		if b.Status.ObservedGeneration != b.Generation {
			amiss = append(amiss, fmt.Sprintf("PodDisruptionBudget %s: status of generation %d, not %d", b.Name, b.Status.ObservedGeneration, b.Generation))
		}
	}
	sort.Strings(amiss)
	return amiss, versions, nil
}

// revisionAnnotation is the Deployment controller's revision of a
// Deployment and of each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// waitWorldSettled waits until the world the operator follows is settled
// (worldNotSettled) and has not changed for quiet: no Deployment,
// ReplicaSet, pod, Job, PodDisruptionBudget or EndpointSlice of the chaos
// namespaces was written meanwhile. It returns how long it waited and what
// was unsettled first, if anything was, or an error that says what is still
// amiss after timeout.
func waitWorldSettled(ctx context.Context, c client.Client, quiet, timeout time.Duration) (time.Duration, string, error) {
	start := time.Now()
	var (
		since    time.Time // when the world was last seen to change, or not settled
		versions map[string]string
		last     string
		first    string
	)
	for {
		amiss, now, err := worldNotSettled(ctx, c)
		switch {
		case err != nil:
			// The API server may be coming back still.
			since, last = time.Time{}, err.Error()
		case len(amiss) > 0:
			since, last = time.Time{}, strings.Join(amiss, "; ")
		case since.IsZero():
			since = time.Now()
		case !maps.Equal(now, versions):
			since, last = time.Now(), "changing: "+changed(versions, now)
		case time.Since(since) >= quiet:
			return time.Since(start), first, nil
		}
		if first == "" {
			first = last
		}
		versions = now
		if time.Since(start) > timeout {
			return 0, "", fmt.Errorf("the world did not settle for %s within %s: %.500s", quiet, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// changed names the objects whose versions differ between before and after.
func changed(before, after map[string]string) string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k+" (gone)")
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// othersWrites returns the writes to the chaos namespaces, within events,
// of everyone but the operator and the suite: kube-controller-manager, the
// scheduler, kwok. Events are news, not changes of the world.
func othersWrites(events []measure.AuditEvent) []measure.AuditEvent {
	var out []measure.AuditEvent
	for _, ev := range events {
		r := ev.ObjectRef
		if ev.Stage != "ResponseComplete" || strings.HasPrefix(ev.UserAgent, operatorUserAgent) || strings.HasPrefix(ev.UserAgent, userAgent) ||
			r.Resource == "events" || !slices.Contains([]string{nsPlain, nsInjected}, r.Namespace) {
			continue
		}
		out = append(out, ev)
	}
	return out
}
