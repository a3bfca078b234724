//go:build install

package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

const leaderMetric = "leader_election_master_status"

// The requirements for a takeover: the time from a leader's end to
// a new object reconciled by the next one. The test measures them; it
// fails only when they are exceeded three times over.
const (
	afterKill = 20 * time.Second // the Lease must expire first
	afterTerm = 5 * time.Second  // the leader gives the lease up on its way out
)

// TestOperatorAsServiceAccount runs the operator as the installed
// ServiceAccount: it drives every sample to Ready and serves the webhooks,
// then replicas take over from a killed and from a stopped leader.
func TestOperatorAsServiceAccount(t *testing.T) {
	scraper := metricsScraper(t)
	if !t.Run("samples", func(t *testing.T) { testSamples(t, scraper) }) {
		return
	}
	t.Run("failover", func(t *testing.T) { testFailover(t, scraper) })
}

// metricsScraper returns the token of a ServiceAccount bound to the
// installed ClusterRole for scrapers.
func metricsScraper(t *testing.T) string {
	t.Helper()
	kubectl.Run(t, "create", "namespace", "monitoring")
	kubectl.Run(t, "-n", "monitoring", "create", "serviceaccount", "scraper")
	kubectl.Run(t, "create", "clusterrolebinding", "scraper", "--clusterrole", "kube-envoy-controller-metrics-reader", "--serviceaccount", "monitoring:scraper")
	t.Cleanup(func() {
		kubectl.Run(t, "delete", "clusterrolebinding", "scraper")
		kubectl.Run(t, "delete", "namespace", "monitoring", "--wait=false")
	})
	_, token := tokenConfig(t, "monitoring", "scraper")
	return token
}

func testSamples(t *testing.T, scraper string) {
	r := startReplica(t, "samples", webhookURL)
	r.waitReady(t)

	// The startup log and the build_info metric carry the stamped version.
	if v := os.Getenv("INSTALL_VERSION"); v != "" {
		if log, _ := os.ReadFile(r.log); !strings.Contains(string(log), `"msg":"starting manager","version":"`+v+`"`) {
			t.Errorf("the startup log does not carry version %s:\n%s", v, tail(r.log, 20))
		}
	}
	// /metrics: only for a token that may read it.
	if _, code, err := r.scrape("", leaderMetric); err != nil || code != 401 {
		t.Errorf("/metrics without a token: %d %v, want 401", code, err)
	}
	_, opToken := tokenConfig(t, operatorNamespace, serviceAccount)
	if _, code, err := r.scrape(opToken, leaderMetric); err != nil || code != 403 {
		t.Errorf("/metrics with a token not bound to the metrics-reader role: %d %v, want 403", code, err)
	}
	if v, code, err := r.scrape(scraper, "kube_envoy_controller_build_info"); err != nil || code != 200 || v != 1 {
		t.Errorf("/metrics as the scraper: build_info %v, status %d, %v", v, code, err)
	}

	ns := "samples"
	kubectl.Run(t, "create", "namespace", ns)
	// The EnvoyConfig samples go through the validating webhook, which the
	// API server calls with the CA of the configuration as its informer
	// has it: the replica is ready once it wrote the CA, which the API
	// server may not have seen yet.
	framework.Eventually(t, time.Minute, "the samples to be applied", func() (bool, error) {
		_, err := kubectl.Out("-n", ns, "apply", "-f", filepath.Join(root, "config", "samples"))
		return err == nil, err
	})
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "foo/example-foo", `{.status.conditions[?(@.type=="Available")].status}`, "True")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/edge-envoy", `{.status.conditions[?(@.type=="Available")].status}`, "True")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "podset/two-podset", `{.status.conditions[?(@.type=="Available")].status}`, "True")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "foobar/foobar-sample", "{.status.phase}", "Succeeded")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "watcher/log-watcher", `{.status.conditions[?(@.type=="Ready")].status}`, "True")
	// A fleet of the built-in xDS server: its client certificate issued and
	// its EnvoyConfig, with a Service's endpoints, published.
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoy/web-gateway", `{.status.conditions[?(@.type=="Available")].status}`, "True")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "secret/web-gateway-xds-client", "{.type}", "kubernetes.io/tls")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "envoyconfig/web-routing", `{.status.conditions[?(@.type=="Accepted")].status}`, "True")

	// The webhooks, served with the certificate the operator made and whose
	// CA it put into the configurations: an invalid EnvoyConfig is refused,
	// and a pod of a namespace with injection gets its sidecar.
	bad := `{"apiVersion":"example.com/v1","kind":"EnvoyConfig","metadata":{"name":"bad"},` +
		`"spec":{"envoyRef":"edge-envoy","resources":{"clusters":[{"name":"web","no_such_field":1}]}}}`
	if out, err := kubectl.Input(bad, "-n", ns, "create", "--dry-run=server", "-f", "-"); err == nil || !strings.Contains(out, "no_such_field") {
		t.Errorf("an EnvoyConfig with an unknown field: want it refused by the validator, naming the field; got %v:\n%s", err, out)
	}
	kubectl.Run(t, "label", "namespace", ns, "kube-envoy-controller.io/injection=enabled")
	framework.Eventually(t, time.Minute, "the injector to add the Watcher's container", func() (bool, error) {
		out, err := kubectl.Out("-n", ns, "run", "probe", "--image=nginx", "--dry-run=server",
			"--annotations=watch.my.domain/inject=log-watcher", "-o", "jsonpath={.spec.containers[*].name}")
		return err == nil && out == "probe log-watcher", fmt.Errorf("%v: %s", err, out)
	})
	r.stop(t, syscall.SIGTERM)
}

func testFailover(t *testing.T, scraper string) {
	ctx := context.Background()
	ns := "failover"
	kubectl.Run(t, "create", "namespace", ns)
	pods := watchPods(t, ns)

	a := startReplica(t, "a", webhookURL)
	a.waitReady(t)
	waitLeader(t, a, scraper)
	b := startReplica(t, "b", 0)
	b.waitReady(t)
	if v, _, err := b.scrape(scraper, leaderMetric); err != nil || v == 1 {
		t.Fatalf("replica b leads beside a: %v %v", v, err)
	}
	if out, err := kubectl.Input(steadyObjects, "-n", ns, "create", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "podset/steady", "{.status.availableReplicas}", "3")
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "foo/before", `{.status.conditions[?(@.type=="Available")].status}`, "True")

	// A fleet of one real Envoy, reaching the replicas through a stand-in
	// for their xDS Service, with requests flowing through it throughout:
	// it keeps its configuration while it reconnects to a replica that
	// remains. No EnvoyConfig is edited after a's end: this test's webhook
	// configurations call a's port, where a cluster's would call a Service
	// in front of every replica.
	var replicasMu sync.Mutex
	replicas := []*replica{a, b}
	svc := startXDSService(t, func() []*replica { replicasMu.Lock(); defer replicasMu.Unlock(); return slices.Clone(replicas) })
	kubectl.Run(t, "create", "namespace", "failover-envoy")
	fleet := startRealEnvoyFleet(t, "failover-envoy", svc)
	load := fleet.startTraffic()

	// SIGKILL: the lease stays a's until it expires.
	conns := fleet.connections(t)
	killed := time.Now()
	reconnectKill := fleet.reconnected(killed, conns)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	createFoo(t, ns, "after-kill")
	kubectl.Run(t, "-n", ns, "scale", "podset/steady", "--replicas=5")
	leadKill, doneKill := takeover(t, b, scraper, ns, "after-kill", killed, 3*afterKill)
	t.Logf("SIGKILL of the leader: b leads after %s, reconciles a new Foo after %s (requirement %s)", leadKill, doneKill, afterKill)
	envoyKill := waitReconnected(t, reconnectKill)

	c := startReplica(t, "c", 0)
	c.waitReady(t)
	replicasMu.Lock()
	replicas = append(replicas, c)
	replicasMu.Unlock()
	// SIGTERM: b gives the lease up as it stops.
	conns = fleet.connections(t)
	termed := time.Now()
	reconnectTerm := fleet.reconnected(termed, conns)
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	createFoo(t, ns, "after-term")
	kubectl.Run(t, "-n", ns, "scale", "podset/steady", "--replicas=4")
	leadTerm, doneTerm := takeover(t, c, scraper, ns, "after-term", termed, 3*afterTerm)
	t.Logf("SIGTERM of the leader: c leads after %s, reconciles a new Foo after %s (requirement %s)", leadTerm, doneTerm, afterTerm)
	envoyTerm := waitReconnected(t, reconnectTerm)
	fleet.waitBody(t, "v1")
	total, failed, first := load.stop()
	envoyResults := fmt.Sprintf("real Envoy: %d of %d requests failed across both failovers; connected to a replica again %s after the SIGKILL, %s after the SIGTERM\n",
		failed, total, envoyKill.Round(10*time.Millisecond), envoyTerm.Round(10*time.Millisecond))
	t.Log(envoyResults)
	if failed != 0 {
		t.Errorf("%d of %d requests through the real Envoy failed across both failovers; the first: %s", failed, total, first)
	}
	b.stop(t, syscall.SIGTERM)
	if b.err != nil {
		t.Errorf("replica b did not exit cleanly on SIGTERM: %v", b.err)
	}

	// No child lost or made twice: every Foo has its Deployment, the PodSet
	// its 4 pods, and it never had more than the 5 it was scaled to.
	for _, foo := range []string{"before", "after-kill", "after-term"} {
		kubectl.WaitJSONPath(t, time.Minute, ns, "foo/"+foo, `{.status.conditions[?(@.type=="Available")].status}`, "True")
	}
	kubectl.WaitJSONPath(t, 2*time.Minute, ns, "podset/steady", "{.status.availableReplicas}", "4")
	framework.Eventually(t, time.Minute, "the PodSet's 4 pods", func() (bool, error) {
		n := pods.live()
		return n == 4, fmt.Errorf("%d live pods", n)
	})
	if m := pods.max(); m > 5 {
		t.Errorf("the PodSet had %d pods at once, more than the 5 it was scaled to", m)
	}
	var deps appsv1.DeploymentList
	if err := admin.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 3 {
		t.Errorf("%d Deployments for 3 Foos", len(deps.Items))
	}
	// The samples, reconciled by each new leader in turn, have not changed.
	checkSampleChildren(t)

	results := fmt.Sprintf("SIGKILL: leader after %s, new object reconciled after %s\nSIGTERM: leader after %s, new object reconciled after %s\n",
		leadKill.Round(10*time.Millisecond), doneKill.Round(10*time.Millisecond), leadTerm.Round(10*time.Millisecond), doneTerm.Round(10*time.Millisecond)) + envoyResults
	if err := os.WriteFile(filepath.Join(dir, "failover.txt"), []byte(results), 0o644); err != nil {
		t.Error(err)
	}
}

const steadyObjects = `apiVersion: demo.k8s.io/v1alpha1
kind: PodSet
metadata: {name: steady}
spec: {replicas: 3}
---
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata: {name: before}
spec: {deploymentName: before, replicas: 1}
`

func createFoo(t *testing.T, ns, name string) {
	t.Helper()
	if out, err := kubectl.Input(fmt.Sprintf("apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: %s}\nspec: {deploymentName: %s, replicas: 1}\n", name, name),
		"-n", ns, "create", "-f", "-"); err != nil {
		t.Fatalf("creating Foo %s: %v\n%s", name, err, out)
	}
}

// takeover waits until next leads and has created the Deployment of the Foo
// named foo, and returns both times since start.
func takeover(t *testing.T, next *replica, scraper, ns, foo string, start time.Time, limit time.Duration) (lead, done time.Duration) {
	t.Helper()
	testenv.Poll(t, 100*time.Millisecond, limit, "replica "+next.name+" to take over and reconcile Foo "+foo, func() (bool, error) {
		if lead == 0 {
			if v, _, _ := next.scrape(scraper, leaderMetric); v == 1 {
				lead = time.Since(start)
			}
		}
		if done == 0 {
			err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: foo}, &appsv1.Deployment{})
			if err == nil {
				done = time.Since(start)
			} else if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return lead != 0 && done != 0, fmt.Errorf("leads after %s, reconciled after %s", lead, done)
	})
	return lead, done
}

func waitLeader(t *testing.T, r *replica, scraper string) {
	t.Helper()
	framework.Eventually(t, time.Minute, "replica "+r.name+" to lead", func() (bool, error) {
		v, code, err := r.scrape(scraper, leaderMetric)
		return v == 1, fmt.Errorf("%v (status %d, %v)", v, code, err)
	})
}

// checkSampleChildren checks that each sample in the namespace samples has
// exactly its children.
func checkSampleChildren(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	count := func(list client.ObjectList, owner string) int {
		if err := admin.List(ctx, list, client.InNamespace("samples")); err != nil {
			t.Fatal(err)
		}
		n := 0
		objs, _ := metaItems(list)
		for _, o := range objs {
			if o.GetDeletionTimestamp() != nil {
				continue
			}
			for _, ref := range o.GetOwnerReferences() {
				if ref.Controller != nil && *ref.Controller && ref.Name == owner {
					n++
				}
			}
		}
		return n
	}
	for _, c := range []struct {
		list  client.ObjectList
		owner string
		want  int
	}{
		{&appsv1.DeploymentList{}, "example-foo", 1},
		{&appsv1.DeploymentList{}, "edge-envoy", 1},
		{&corev1.ServiceList{}, "edge-envoy", 1},
		{&corev1.ConfigMapList{}, "edge-envoy", 1},
		{&corev1.ConfigMapList{}, "log-watcher", 1},
		{&corev1.PodList{}, "two-podset", 3},
	} {
		if got := count(c.list, c.owner); got != c.want {
			t.Errorf("%T owned by %s: %d, want %d", c.list, c.owner, got, c.want)
		}
	}
	kubectl.WaitJSONPath(t, time.Minute, "samples", "jobs", "{.items[*].metadata.name}", "foobar-sample-1")
}

func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	var out []metav1.Object
	switch l := list.(type) {
	case *appsv1.DeploymentList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ServiceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ConfigMapList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.PodList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unexpected list %T", list)
	}
	return out, nil
}

func ownedByPodSet(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "PodSet" && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// podWatch follows the PodSets' pods of a namespace and remembers the most that were
// alive (not being deleted) at once.
type podWatch struct {
	mu    sync.Mutex
	alive map[string]bool
	most  int
}

func (p *podWatch) live() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.alive) }
func (p *podWatch) max() int  { p.mu.Lock(); defer p.mu.Unlock(); return p.most }

func watchPods(t *testing.T, ns string) *podWatch {
	t.Helper()
	w, err := kubernetes.NewForConfigOrDie(adminCfg).CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	p := &podWatch{alive: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if !ownedByPodSet(pod) {
				continue
			}
			p.mu.Lock()
			if ev.Type == watch.Deleted || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				delete(p.alive, pod.Name)
			} else {
				p.alive[pod.Name] = true
			}
			p.most = max(p.most, len(p.alive))
			p.mu.Unlock()
		}
	}()
	return p
}
