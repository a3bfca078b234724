package main

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
)

// A route whose live object changes between the read and the dry run (the
// operator writes its status) is read again and dry-run again, as an
// apply would, rather than failing the diff.
func TestDryRunAgainOnConflict(t *testing.T) {
	live := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "1"},
		Spec: gwv1.HTTPRouteSpec{Hostnames: []gwv1.Hostname{"a.example.com"}}}
	gc := fake.NewClientset(live)
	updates := 0
	gc.PrependReactor("update", "httproutes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if updates++; updates == 1 {
			return true, nil, apierrors.NewConflict(gwv1.Resource("httproutes"), "web", nil)
		}
		return false, nil, nil
	})
	edited := live.DeepCopy()
	edited.Spec.Hostnames = []gwv1.Hostname{"b.example.com"}
	f := gatewayFile{kind: "HTTPRoute", key: types.NamespacedName{Namespace: "ns", Name: "web"}, http: edited}
	got, err := dryRunAgainOnConflict(context.Background(), gc, f, newGatewayObjects())
	if err != nil {
		t.Fatalf("a conflict once: %v", err)
	}
	if updates != 2 || got.http == nil || len(got.http.Spec.Hostnames) != 1 || got.http.Spec.Hostnames[0] != "b.example.com" {
		t.Errorf("%d updates, the route dry-run as %+v; want 2 and the edit", updates, ptr.Deref(got.http, gwv1.HTTPRoute{}).Spec)
	}
	// That the dry run writes nothing, the fake does not tell (it ignores
	// dryRun): TestGatewayLive checks it against a real API server.
}
