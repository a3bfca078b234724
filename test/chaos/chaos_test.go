//go:build chaos

// Package chaos is the operator's chaos suite (make chaos; make e2e, and so
// make test, runs it for 60 s in the end-to-end cluster, after the
// end-to-end tests). On a local kwokctl cluster it creates several objects
// of every kind, then, for CHAOS_DURATION (default 60s), injects faults at
// random, in bursts of one to three (see faults): children deleted and
// edited (Deployments, Services, ConfigMaps, a PodSet's pods, a FooBar's
// Jobs, the webhooks' caBundle), fields the operator sets to a zero value
// edited (a Deployment's replicas set to 0, a proxy's false
// automountServiceAccountToken set true), a FooBar changed, the operator SIGKILLed
// and started again, kube-apiserver and etcd restarted. After each burst,
// everything must be as it should again within CHAOS_CONVERGE (default
// 60s). Throughout, no PodSet may have a pod beyond its replicas and no
// FooBar generation's Job may be created twice. The operator's writes,
// counted in the API server's audit log, must stay within the faults'
// budget; once settled, it must write nothing for CHAOS_SETTLE (default
// 20s). It is settled once the world it follows (Deployments, ReplicaSets,
// pods, Jobs: what kube-controller-manager and kwok report) has settled too,
// and not changed for CHAOS_QUIET (default 10s), and it reports ready
// again. hack/e2e.sh then checks the operator's log (hack/logcheck).
//
// hack/e2e.sh passes the cluster and the operator's command line in the
// environment: CHAOS_ROOT, CHAOS_CLUSTER, KUBECONFIG, OPERATOR_BIN,
// OPERATOR_ARGS (one a line), OPERATOR_LOG, OPERATOR_HEALTH_ADDR,
// OPERATOR_PIDFILE, and CHAOS_WRITES_FILE, where the run writes the
// operator's audited writes. CHAOS_SEED replays a run's choice of faults;
// CHAOS_FAULTS, a comma-separated list of fault names, restricts them.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/conditions"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/manager"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// userAgent is the chaos suite's own, so that the audit log tells its
// requests from the operator's.
const userAgent = "kec-chaos"

// operatorUserAgent starts the user agent of every request the operator sends.
const operatorUserAgent = "kube-envoy-controller"

func durationEnv(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 60s or 5m", name, v)
	}
	return d
}

// newClients returns the suite's clients, with its user agent.
func newClients(t *testing.T) (client.Client, kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.UserAgent, cfg.QPS, cfg.Burst = userAgent, 100, 200
	// The client logs the API server's warnings (a fault's patch may draw
	// one): to the test's output, not to a logger that was never set.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	// The suite's own writes that a webhook had no time for are sent again
	// (test/framework): the chaos judges the operator, not the webhook's
	// deadline on a busy machine.
	cw, err := client.NewWithWatch(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	c := framework.WebhookPatient(cw)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cs
}

// ensureObjects creates the chaos namespaces and objects that do not exist.
func ensureObjects(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range namespaces() {
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, obj := range objectsOfEveryKind() {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

func TestChaos(t *testing.T) {
	duration := durationEnv(t, "CHAOS_DURATION", 60*time.Second)
	converge := durationEnv(t, "CHAOS_CONVERGE", 60*time.Second)
	settle := durationEnv(t, "CHAOS_SETTLE", 20*time.Second)
	quiet := durationEnv(t, "CHAOS_QUIET", 10*time.Second)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("%s %6.1fs  %s\n", time.Now().Format("15:04:05.0"), time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	logf("chaos for %s, seed %d (CHAOS_SEED=%d replays its faults)", duration, seed, seed)

	chosen := faults
	if names := os.Getenv("CHAOS_FAULTS"); names != "" {
		chosen = nil
		for _, f := range faults {
			if slices.Contains(strings.Split(names, ","), f.name) {
				chosen = append(chosen, f)
			}
		}
		if len(chosen) == 0 {
			t.Fatalf("CHAOS_FAULTS=%q names none of the faults", names)
		}
	}
	c, cs := newClients(t)
	if path := os.Getenv("CHAOS_WRITES_FILE"); path != "" {
		// Every audited write, the operator's and others', also after a failure.
		cl := clusterFromEnv(t)
		t.Cleanup(func() { writeWrites(t, path, cl.audit(t)) })
	}
	r := &run{t: t, c: c, rnd: rand.New(rand.NewPCG(seed, seed>>1)), op: operatorFromEnv(t), cluster: clusterFromEnv(t), objects: objectsOfEveryKind()}
	r.opNS = operatorNamespace(r.op.args)
	r.proxy = &rejectingProxy{c: c, addr: xdsAddress(r.op.args)}
	if r.proxy.addr == "" {
		t.Fatal("OPERATOR_ARGS has no --xds-bind-address")
	}

	r.op.start(t)
	logf("operator ready")
	ensureObjects(t, c)
	go r.proxy.run(ctx)
	rejectAVersion(ctx, t, c, r.proxy)
	logf("every proxy of %s rejected a version of %s, and the fleet rolled back", rejectingEnvoy, rejectingConfig)
	if _, err := waitConverged(ctx, c, r.opNS, r.objects, nil, 3*time.Minute); err != nil {
		t.Fatalf("the objects never became ready: %v", err)
	}
	var err error
	if r.snapshot, err = children(ctx, c); err != nil {
		t.Fatal(err)
	}
	logf("%d objects ready, with %d children", len(r.objects), len(r.snapshot))
	// The chaos starts on a quiet cluster. Namespaces that earlier tests
	// deleted may still be emptied: an API server restarted meanwhile can
	// serve the namespace controller a discovery without the CRDs, and it
	// then removes the namespace with our objects still in it (a race of
	// Kubernetes' own, which the operator cannot help).
	if err := waitNoTerminatingNamespace(ctx, c, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	logf("no namespace being deleted")

	replicas := map[string]int{}
	for _, o := range r.objects {
		if ps, ok := o.(*demov1alpha1.PodSet); ok {
			replicas[ps.Name] = int(ps.Spec.Replicas)
		}
	}
	watch := newObserver(replicas)
	if err := watch.start(ctx, cs); err != nil {
		t.Fatal(err)
	}

	// The chaos.
	chaosStart := mark(t, c, "chaos-start")
	var (
		injected, need, bursts int
		longest                time.Duration
		longestAfter           string
		byFault                = map[string]int{}
		lastInjected           = map[string]time.Time{}
	)
	for time.Since(chaosStart.at) < duration {
		bursts++
		burstStart := time.Now()
		var did []string
		for want, tries := 1+r.rnd.IntN(3), 0; len(did) < want && tries < 20; tries++ {
			f := chosen[r.rnd.IntN(len(chosen))]
			if at, ok := lastInjected[f.name]; ok && time.Since(at) < f.spacing {
				continue
			}
			lastInjected[f.name] = time.Now()
			what, n, ok, err := inject(ctx, r, f)
			if err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
			if !ok {
				continue
			}
			injected++
			need += n
			byFault[f.name]++
			did = append(did, what)
		}
		if len(did) == 0 {
			t.Fatal("no fault found anything to act on")
		}
		last, err := waitConverged(ctx, c, r.opNS, r.objects, r.snapshot, converge)
		took := time.Since(burstStart) // from the burst's first fault
		if err != nil {
			t.Fatalf("not converged within %s after: %s: %v", converge, strings.Join(did, "; "), err)
		}
		if _, resent := r.proxy.report(); len(resent) > 0 {
			t.Fatalf("after: %s: the rejected version was served again: %v", strings.Join(did, "; "), resent)
		}
		logf("converged %.1fs after: %s", took.Seconds(), strings.Join(did, "; "))
		if took > 5*time.Second && last != "" {
			logf("        last amiss: %.300s", last)
		}
		if took > longest {
			longest, longestAfter = took, strings.Join(did, "; ")
		}
		time.Sleep(time.Duration(r.rnd.IntN(2000)) * time.Millisecond)
	}
	faultsEnd := time.Now()

	// Settled: nothing to write, once the world the operator follows has
	// settled too (waitWorldSettled). What the operator writes meanwhile, as
	// kube-controller-manager catches up, still counts towards the budget.
	waited, unsettled, err := waitWorldSettled(ctx, c, quiet, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waitConverged(ctx, c, r.opNS, r.objects, r.snapshot, converge); err != nil {
		t.Fatalf("not converged once the world settled: %v", err)
	}
	logf("the world settled in %.1fs after the chaos (unchanged for %s)", waited.Seconds(), quiet)
	if unsettled != "" {
		logf("        first unsettled: %.300s", unsettled)
	}
	chaosEnd := mark(t, c, "chaos-end")
	settleStart := mark(t, c, "settle-start")
	time.Sleep(settle)
	settleEnd := mark(t, c, "settle-end")

	r.op.stop(t)
	cancel()

	audit := r.cluster.audit(t)
	chaosWrites := countWrites(operatorWrites(t, audit, r.opNS, chaosStart, chaosEnd))
	settled, late := earlierEvents(operatorWrites(t, audit, r.opNS, settleStart, settleEnd), settleStart.at)
	settledWrites := countWrites(settled)
	worldWrites := countAgentWrites(othersWrites(between(t, audit, settleStart, settleEnd)))
	budget := need + slackPerFault*injected
	excess, excessOf := watch.podsBeyondReplicas()
	podDeletes := chaosWrites["delete pods"]
	twice := watch.runTwice()
	responses, resent := r.proxy.report()

	fmt.Printf("\nchaos summary (seed %d)\n", seed)
	fmt.Printf("  faults injected:          %d in %d bursts over %s (%s)\n", injected, bursts, faultsEnd.Sub(chaosStart.at).Round(time.Second), counts(byFault))
	fmt.Printf("  longest reconvergence:    %.1fs, after: %s\n", longest.Seconds(), longestAfter)
	fmt.Printf("  operator writes:          %d (budget %d: %d needed by the faults + %d per fault)\n",
		total(chaosWrites), budget, need, slackPerFault)
	fmt.Printf("                            %s\n", breakdown(chaosWrites))
	fmt.Printf("  settled:                  %d writes in %s (%.1f/min), besides %d late deliveries of events from before\n",
		total(settledWrites), settle, float64(total(settledWrites))/settle.Minutes(), len(late))
	fmt.Printf("                            the world: %d writes by others (%s), settled in %.1fs after the chaos\n",
		total(worldWrites), breakdown(worldWrites), waited.Seconds())
	fmt.Printf("  pods beyond replicas:     %d %s (and %d pods the operator deleted)\n", excess, excessOf, podDeletes)
	fmt.Printf("  commands run twice:       %d %v (Jobs seen: %s)\n", len(twice), twice, watch.generations())
	fmt.Printf("  rejected version served:  %d %v (of %d responses to %s's proxy since the rollback; %s)\n", len(resent), resent, responses, rejectingEnvoy, r.proxy)

	if total(chaosWrites) > budget {
		t.Errorf("the operator sent %d writes during the chaos, beyond the budget of %d", total(chaosWrites), budget)
	}
	if n := total(settledWrites); n > 0 {
		// The world's writes in the window tell a reaction to a world that
		// had not settled after all from a settled operator's noise.
		t.Errorf("the operator sent %d writes once settled, in %s: %s (the world's writes meanwhile: %d %s)",
			n, settle, breakdown(settledWrites), total(worldWrites), breakdown(worldWrites))
	}
	if excess > 0 || podDeletes > 0 {
		t.Errorf("PodSet %s had %d pods beyond its replicas; the operator deleted %d pods (a PodSet whose replicas never change deletes one only after one too many)",
			excessOf, excess, podDeletes)
	}
	if len(twice) > 0 {
		t.Errorf("FooBar commands run twice for one generation: %v", twice)
	}
	if len(resent) > 0 {
		t.Errorf("the version every proxy of %s rejected was served again: %v", rejectingEnvoy, resent)
	}
}

// rejectAVersion has the proxy of the fleet rejectingEnvoy accept its
// configuration, then gives its EnvoyConfig a cluster the proxy rejects, and
// waits until the fleet has rolled back and the EnvoyConfig records the
// rejection. From then on, the proxy watches for the rejected version.
func rejectAVersion(ctx context.Context, t *testing.T, c client.Client, p *rejectingProxy) {
	t.Helper()
	ec := &examplev1.EnvoyConfig{}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
			err := c.Get(ctx, client.ObjectKey{Namespace: nsPlain, Name: rejectingConfig}, ec)
			if err == nil && cond() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 3 minutes (status %+v, proxy: %s, error %v)", what, ec.Status, p, err)
			}
		}
	}
	wait("the proxy of "+rejectingEnvoy+" to accept its configuration", func() bool {
		return ec.Status.Proxies.Acked == 1 && conditions.IsTrue(ec.Status.Conditions, examplev1.EnvoyConfigConditionPublished)
	})
	clusters := append(ec.Spec.Resources.Clusters, runtime.RawExtension{Raw: []byte(`{"name":"` + rejectedCluster + `","type":"EDS","connect_timeout":"1s",` +
		`"eds_cluster_config":{"eds_config":{"ads":{},"resource_api_version":"V3"}}}`)})
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"clusters": clusters}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, ec, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	// The fleet rolls back, and the change, attributed to this EnvoyConfig,
	// is withheld: its status passes through RolledBack to Withheld.
	wait("the fleet "+rejectingEnvoy+" to roll back", func() bool {
		reason := conditions.Reason(ec.Status.Conditions, examplev1.EnvoyConfigConditionDegraded)
		return (reason == examplev1.EnvoyConfigReasonRolledBack || reason == examplev1.EnvoyConfigReasonWithheld) && len(ec.Status.RejectedVersions) > 0
	})
	p.markRolledBack()
}

// inject injects f, again when the API server failed to answer (it may be
// coming back from an earlier fault of the burst).
func inject(ctx context.Context, r *run, f fault) (what string, need int, ok bool, err error) {
	for range 30 {
		what, need, ok, err = f.inject(ctx, r)
		if err == nil || !transient(err) {
			return what, need, ok, err
		}
		time.Sleep(time.Second)
	}
	return what, need, ok, err
}

// transient reports whether err is the API server's absence rather than its
// answer: no connection, or a 5xx or 429 status.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	code := status.Status().Code
	return code >= 500 || code == 429
}

// waitConverged polls until nothing is amiss (notReady), and returns what
// was amiss last before that, or an error that says what is still amiss
// after timeout.
func waitConverged(ctx context.Context, c client.Client, opNS string, objs []client.Object, snapshot []child, timeout time.Duration) (string, error) {
	start := time.Now()
	last := ""
	var lastErr error
	for time.Since(start) < timeout {
		amiss, err := notReady(ctx, c, opNS, objs, snapshot)
		if err == nil && len(amiss) == 0 {
			return last, nil
		}
		if err != nil {
			lastErr = err
			last = err.Error()
		} else {
			last = strings.Join(amiss, "; ")
		}
		time.Sleep(250 * time.Millisecond)
	}
	if lastErr != nil && strings.Contains(last, lastErr.Error()) {
		return "", lastErr
	}
	return "", fmt.Errorf("%s", last)
}

// waitNoTerminatingNamespace waits until no namespace is being deleted.
func waitNoTerminatingNamespace(ctx context.Context, c client.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var list corev1.NamespaceList
		err := c.List(ctx, &list)
		var terminating []string
		for _, ns := range list.Items {
			if ns.Status.Phase == corev1.NamespaceTerminating {
				terminating = append(terminating, ns.Name)
			}
		}
		if err == nil && len(terminating) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespaces still being deleted after %s: %v (%v)", timeout, terminating, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// marker is a write of the chaos suite's own that the audit log records: it
// bounds a window of the log, and proves that the log covers that window.
type marker struct {
	name string
	at   time.Time
}

// mark creates the ConfigMap name in nsPlain (no child of the operator's:
// it has no label, so the operator does not see it).
func mark(t *testing.T, c client.Client, name string) marker {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsPlain}}
	// The API server may be restarting still: retry.
	deadline := time.Now().Add(time.Minute)
	for {
		at := time.Now()
		err := c.Create(context.Background(), cm)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return marker{name: name, at: at}
		}
		if time.Now().After(deadline) {
			t.Fatalf("marking %s: %v", name, err)
		}
		time.Sleep(time.Second)
	}
}

// operatorWrites returns the operator's write requests to the chaos
// namespaces, to opNS (its own: the fleets' histories, the replicas'
// reports) and to the webhook configurations between two markers.
func operatorWrites(t *testing.T, events []measure.AuditEvent, opNS string, from, to marker) []measure.AuditEvent {
	t.Helper()
	var out []measure.AuditEvent
	for _, ev := range between(t, events, from, to) {
		r := ev.ObjectRef
		ours := r.Namespace == nsPlain || r.Namespace == nsInjected || r.Namespace == opNS || strings.HasSuffix(r.Resource, "webhookconfigurations")
		if ev.Stage != "ResponseComplete" || !strings.HasPrefix(ev.UserAgent, operatorUserAgent) || !ours {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// between returns the events received between two markers. It fails when
// the log lacks either marker: then it does not cover the window, and a
// count of zero would prove nothing.
func between(t *testing.T, events []measure.AuditEvent, from, to marker) []measure.AuditEvent {
	t.Helper()
	at := func(m marker) time.Time {
		for _, ev := range events {
			if ev.Stage == "ResponseComplete" && ev.Verb == "create" && strings.HasPrefix(ev.UserAgent, userAgent) &&
				ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Namespace == nsPlain && ev.ObjectRef.Name == m.name {
				return ev.RequestReceivedTimestamp
			}
		}
		t.Fatalf("the audit log (%d events) lacks the marker %s: does test/chaos/audit-policy.yaml cover %s?", len(events), m.name, nsPlain)
		return time.Time{}
	}
	begin, end := at(from), at(to)
	var out []measure.AuditEvent
	for _, ev := range events {
		if ev.RequestReceivedTimestamp.Before(begin) || ev.RequestReceivedTimestamp.After(end) {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// countWrites counts writes by "verb resource[/subresource]".
func countWrites(events []measure.AuditEvent) map[string]int {
	counts := map[string]int{}
	for _, ev := range events {
		key := ev.Verb + " " + ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			key += "/" + ev.ObjectRef.Subresource
		}
		counts[key]++
	}
	return counts
}

// countAgentWrites counts writes by "agent verb resource[/subresource]",
// the agent without its version.
func countAgentWrites(events []measure.AuditEvent) map[string]int {
	counts := map[string]int{}
	for _, ev := range events {
		agent, _, _ := strings.Cut(ev.UserAgent, "/")
		for k, n := range countWrites([]measure.AuditEvent{ev}) {
			counts[agent+" "+k] += n
		}
	}
	return counts
}

// earlierEvents splits off the writes of events that were recorded before
// since: client-go's event recorder tries a failed event again, every 10
// seconds, up to 12 times, so an event the API server could not take during
// a fault may arrive once all is settled. It is news of the chaos, not a
// write of the settled operator. An event's name is its object's name and
// the time it was recorded, in hexadecimal nanoseconds.
func earlierEvents(events []measure.AuditEvent, since time.Time) (rest, earlier []measure.AuditEvent) {
	for _, ev := range events {
		if ev.ObjectRef.Resource == "events" {
			i := strings.LastIndexByte(ev.ObjectRef.Name, '.')
			if nanos, err := strconv.ParseInt(ev.ObjectRef.Name[i+1:], 16, 64); i >= 0 && err == nil && time.Unix(0, nanos).Before(since) {
				earlier = append(earlier, ev)
				continue
			}
		}
		rest = append(rest, ev)
	}
	return rest, earlier
}

// writeWrites writes the audited writes, one a line, with their user
// agents: what a run cost, and who did what.
func writeWrites(t *testing.T, path string, events []measure.AuditEvent) {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		if ev.Stage != "ResponseComplete" {
			continue
		}
		r := ev.ObjectRef
		agent, _, _ := strings.Cut(ev.UserAgent, "/")
		fmt.Fprintf(&b, "%s %s %s/%s %s/%s %d %s\n", ev.RequestReceivedTimestamp.Format("15:04:05.000"), ev.Verb,
			r.Resource, r.Subresource, r.Namespace, r.Name, ev.ResponseStatus.Code, agent)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func breakdown(counts map[string]int) string {
	return counts2(counts, ": ")
}

func counts(m map[string]int) string { return counts2(m, " ×") }

func counts2(m map[string]int, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s%s%d", k, sep, m[k])
	}
	return strings.Join(parts, ", ")
}
