package announce

import (
	"context"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// Only a loopback IP address, with a port, is an address to dial.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8444":  "127.0.0.1:8444",
		"127.1.2.3:1":     "127.1.2.3:1",
		"[::1]:8444":      "[::1]:8444",
		"127.0.0.1:0":     "",
		"127.0.0.1:65536": "",
		"127.0.0.1":       "",
		"localhost:8444":  "",
		"10.0.0.1:8444":   "",
		"0.0.0.0:8444":    "",
		"[::]:8444":       "",
		"192.0.2.1:8444":  "",
		"":                "",
	} {
		got, ok := Loopback(addr)
		if got != want || ok != (want != "") {
			t.Errorf("Loopback(%q) = %q, %v; want %q", addr, got, ok, want)
		}
	}
}

// The endpoint of a replica listening on every address is reached on loopback.
func TestReachable(t *testing.T) {
	for bound, want := range map[string]string{
		"127.0.0.1:8444": "127.0.0.1:8444",
		"0.0.0.0:8444":   "127.0.0.1:8444",
		"[::]:8444":      "127.0.0.1:8444",
		"[::1]:8444":     "[::1]:8444",
		"10.1.2.3:8444":  "",
	} {
		addr, err := net.ResolveTCPAddr("tcp", bound)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := reachable(addr); got != want {
			t.Errorf("reachable(%s) = %q, want %q", bound, got, want)
		}
	}
}

// A replica's Lease name is a valid name, one of its own.
func TestLeaseName(t *testing.T) {
	names := map[string]string{}
	for _, replica := range []string{"dev-host", "Dev-Host", "dev_host", "dev.host.", strings.Repeat("a", 300), strings.Repeat("a", 301)} {
		name := LeaseName(replica)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("LeaseName(%q) = %q: %v", replica, name, errs)
		}
		if other, ok := names[name]; ok {
			t.Errorf("LeaseName(%q) = LeaseName(%q) = %q", replica, other, name)
		}
		names[name] = replica
	}
	if got := LeaseName("dev-host"); got != "kube-envoy-controller-debug-dev-host" {
		t.Errorf("LeaseName(dev-host) = %q", got)
	}
}

func lease(name, holder, addr string, labels map[string]string) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{AddressAnnotation: addr}}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// Only labelled Leases with a holder and a loopback address are endpoints.
func TestEndpoints(t *testing.T) {
	ours := map[string]string{NameLabel: NameValue, ComponentLabel: ComponentValue}
	deleting := lease("deleting", "d", "127.0.0.1:5", ours)
	deleting.DeletionTimestamp = &metav1.Time{}
	got := Endpoints([]coordinationv1.Lease{
		lease("b", "op-b", "127.0.0.1:2", ours),
		lease("a", "op-a", "[::1]:1", ours),
		lease("remote", "r", "10.0.0.1:3", ours),
		lease("named", "n", "localhost:3", ours),
		lease("no-holder", "", "127.0.0.1:4", ours),
		lease("unlabelled", "u", "127.0.0.1:6", map[string]string{NameLabel: NameValue}),
		deleting,
	})
	want := []Endpoint{{Replica: "op-a", Lease: "a", Address: "[::1]:1"}, {Replica: "op-b", Lease: "b", Address: "127.0.0.1:2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Endpoints = %+v, want %+v", got, want)
	}
}

// A replica that starts again at the same address writes nothing: a
// settled operator, and one restarted as it was, make no write.
func TestRecordWritesOnlyAChange(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	a := New(Options{Client: cs, Namespace: "ops", Replica: "dev-host", Log: logr.Discard()})
	writes := func() []string {
		var out []string
		for _, act := range cs.Actions() {
			if act.GetVerb() != "get" {
				out = append(out, act.GetVerb())
			}
		}
		cs.ClearActions()
		return out
	}
	for _, step := range []struct {
		addr string
		want []string
	}{
		{"127.0.0.1:8444", []string{"create"}},
		{"127.0.0.1:8444", nil},
		{"127.0.0.1:9444", []string{"update"}},
	} {
		l, err := a.record(ctx, step.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := writes(); !reflect.DeepEqual(got, step.want) {
			t.Errorf("recording %s: writes %v, want %v", step.addr, got, step.want)
		}
		if got := Endpoints([]coordinationv1.Lease{*l}); len(got) != 1 || got[0].Address != step.addr || got[0].Replica != "dev-host" {
			t.Errorf("recorded %+v, want %s", got, step.addr)
		}
	}
}
