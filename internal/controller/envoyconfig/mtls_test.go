package envoyconfig

import (
	"context"
	"slices"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

// A proxy stays served across a rotation of the CA and of its own
// certificate: its open stream gets the next configuration; a new
// connection with its old certificate, from the old CA, is still accepted;
// one with a certificate of the new CA is too, and by then the server's own
// certificate comes from the new CA.
func TestServedAcrossCARotation(t *testing.T) {
	ctx := context.Background()
	ns, fleetID := newFleet(t)
	cfg := newConfig(ns, "clusters", cluster("one", "1s"))
	create(t, cfg)
	// Served first: the proxy below asserts the first answer it gets, and
	// a fleet with nothing published yet is answered with no cluster.
	waitStatus(t, cfg, "the clusters published", func(c *examplev1.EnvoyConfig) bool {
		return condition(c, examplev1.EnvoyConfigConditionPublished).Status == "True"
	})
	addr := xdsClient(t)

	// The CA enters the last third of its life: the rotator adds a successor.
	aging, err := pki.NewCA(time.Now().Add(-25*24*time.Hour), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	old := pki.Authority{CAs: []pki.CA{aging}}
	want, err := authority.Secret(ca.Key, old)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	testenv.Eventually(t, "the CA Secret", func() (bool, error) { return suite.Client.Get(ctx, ca.Key, sec) == nil, nil })
	sec.Data = want.Data
	if err := suite.Client.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	var rotated pki.Authority
	testenv.Eventually(t, "the rotator to add a new CA", func() (bool, error) {
		a, err := ca.Authority(ctx)
		rotated = a
		return err == nil && len(a.CAs) == 2 && a.CAs[1].Cert.Equal(aging.Cert), nil
	})
	newCA := rotated.CAs[0]

	// A proxy with a certificate of the old CA, trusting both.
	oldLeaf, err := pki.IssueClient(old, fleet.ID{Namespace: ns, Name: "edge"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	p := xdstest.Connect(t, xdstest.DialTLS(t, addr, "localhost", oldLeaf.Cert, oldLeaf.Key, rotated.Bundle()), fleetID, "pod-1", resourcev3.ClusterType)
	if _, names := clusterNames(t, p, ""); !slices.Equal(names, []string{"one"}) {
		t.Fatalf("before the new CA signs: clusters %v", names)
	}

	// The new CA starts signing.
	testenv.Eventually(t, "the new CA to sign", func() (bool, error) {
		return rotated.Signer(time.Now(), testPKI).Cert.Equal(newCA.Cert), nil
	})
	patch := client.MergeFrom(cfg.DeepCopy())
	cfg.Spec.Resources = examplev1.EnvoyResources{Clusters: []runtime.RawExtension{cluster("one", "1s"), cluster("two", "1s")}}
	if err := suite.Client.Patch(ctx, cfg, patch); err != nil {
		t.Fatal(err)
	}
	if _, names := clusterNames(t, p, ""); !sameNames(names, "one", "two") {
		t.Errorf("the open stream, after the rotation: clusters %v", names)
	}

	// New connections: with the old certificate, and with one of the new CA
	// from a proxy that trusts only the new CA (so the server's certificate
	// must come from it now).
	newLeaf, err := pki.IssueClient(rotated, fleet.ID{Namespace: ns, Name: "edge"}, time.Now(), testPKI)
	if err != nil {
		t.Fatal(err)
	}
	onlyNew := pki.Authority{CAs: []pki.CA{newCA}}
	for name, c := range map[string]struct {
		leaf   pki.Leaf
		trusts []byte
	}{
		"old certificate": {oldLeaf, rotated.Bundle()},
		"new certificate": {newLeaf, onlyNew.Bundle()},
	} {
		q := xdstest.Connect(t, xdstest.DialTLS(t, addr, "localhost", c.leaf.Cert, c.leaf.Key, c.trusts), fleetID, "pod-"+name, resourcev3.ClusterType)
		if _, names := clusterNames(t, q, ""); !sameNames(names, "one", "two") {
			t.Errorf("%s: clusters %v", name, names)
		}
	}
}

// sameNames reports whether names are want, in any order.
func sameNames(names []string, want ...string) bool {
	names = slices.Clone(names)
	slices.Sort(names)
	return slices.Equal(names, want)
}
