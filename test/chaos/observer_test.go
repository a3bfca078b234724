//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// observer watches, through the whole run, what must never happen: a
// PodSet with more active pods than replicas, and a FooBar generation's Job
// created twice (two objects of one name: the command ran twice). Its
// informers list again after a watch breaks (an API server restart), so it
// sees every object that lived long enough to be listed or watched.
type observer struct {
	mu       sync.Mutex
	replicas map[string]int                // PodSet name → spec.replicas
	active   map[string]map[types.UID]bool // PodSet name → its active pods
	excess   map[string]int                // PodSet name → most pods beyond replicas seen
	jobs     map[string]map[types.UID]bool // Job name → the objects of that name seen
	stop     chan struct{}
}

func newObserver(replicas map[string]int) *observer {
	return &observer{
		replicas: replicas,
		active:   map[string]map[types.UID]bool{},
		excess:   map[string]int{},
		jobs:     map[string]map[types.UID]bool{},
		stop:     make(chan struct{}),
	}
}

// start runs the informers until ctx ends, once they have synced.
func (o *observer) start(ctx context.Context, cs kubernetes.Interface) error {
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(nsInjected))
	jobs := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(nsPlain))
	if _, err := pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.pod(obj, false) },
		UpdateFunc: func(_, obj any) { o.pod(obj, false) },
		DeleteFunc: func(obj any) { o.pod(obj, true) },
	}); err != nil {
		return err
	}
	if _, err := jobs.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    o.job,
		UpdateFunc: func(_, obj any) { o.job(obj) },
	}); err != nil {
		return err
	}
	pods.Start(ctx.Done())
	jobs.Start(ctx.Done())
	for typ, ok := range pods.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer of %v did not sync", typ)
		}
	}
	for typ, ok := range jobs.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer of %v did not sync", typ)
		}
	}
	return nil
}

func (o *observer) pod(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "PodSet" {
		return
	}
	active := !deleted && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	o.mu.Lock()
	defer o.mu.Unlock()
	set := o.active[ref.Name]
	if set == nil {
		set = map[types.UID]bool{}
		o.active[ref.Name] = set
	}
	if active {
		set[p.UID] = true
	} else {
		delete(set, p.UID)
	}
	if n := len(set) - o.replicas[ref.Name]; n > o.excess[ref.Name] {
		o.excess[ref.Name] = n
	}
}

func (o *observer) job(obj any) {
	j, ok := obj.(*batchv1.Job)
	if !ok || metav1.GetControllerOf(j) == nil || metav1.GetControllerOf(j).Kind != "FooBar" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.jobs[j.Name] == nil {
		o.jobs[j.Name] = map[types.UID]bool{}
	}
	o.jobs[j.Name][j.UID] = true
}

// podsBeyondReplicas returns the most pods beyond replicas any PodSet had,
// and which.
func (o *observer) podsBeyondReplicas() (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	most, which := 0, ""
	for name, n := range o.excess {
		if n > most {
			most, which = n, name
		}
	}
	return most, which
}

// runTwice returns the Jobs (FooBar generations) created more than once.
func (o *observer) runTwice() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for name, uids := range o.jobs {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s (%d times)", name, len(uids)))
		}
	}
	sort.Strings(out)
	return out
}

// generations returns how many FooBar generations ran, by Job name.
func (o *observer) generations() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	names := make([]string, 0, len(o.jobs))
	for name := range o.jobs {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}
