package envoyconfig

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/history"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
)

// A fleet's history that does not pass the checks (damaged here) is
// reported once, by the reconcile that writes it afresh: Degraded, with
// reason HistoryUnusable, and its Warning event. The next reconcile reads
// the history written afresh, and the fleet is not Degraded any more.
func TestUnusableHistoryIsReportedOnce(t *testing.T) {
	ctx := context.Background()
	ns, _ := newFleet(t)
	id := fleet.ID{Namespace: ns, Name: "edge"}
	cfg := newConfig(ns, "a", cluster("a", "1s"))
	create(t, cfg)
	waitStatus(t, cfg, "the config to be published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == metav1.ConditionTrue
	})
	version := readHistory(t, id, "the fleet's history", func(h publish.History) bool { return h.Current != "" }).Current

	cm := &corev1.ConfigMap{}
	if err := suite.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: history.Name(id)}, cm); err != nil {
		t.Fatal(err)
	}
	for k := range cm.BinaryData {
		cm.BinaryData[k] = []byte("damaged")
	}
	if err := suite.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}

	suite.WaitEvent(t, ns, cfg.Name, "Warning "+examplev1.EnvoyConfigReasonHistoryUnusable+" the fleet's revision history in ConfigMap "+operatorNamespace+"/"+cm.Name+" was unusable")
	readHistory(t, id, "the history written afresh", func(h publish.History) bool { return h.Current == version })
	waitStatus(t, cfg, "Degraded to clear", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionDegraded).Status == metav1.ConditionFalse
	})
	suite.Touch(t, ControllerName, cfg)
	var events eventsv1.EventList
	if err := suite.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Reason == examplev1.EnvoyConfigReasonHistoryUnusable {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	if n != 1 {
		t.Errorf("%d HistoryUnusable events, want one", n)
	}
}
