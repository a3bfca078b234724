package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
)

// The replicas asked are the operator's running pods, at their port named
// debug, or 8444.
func TestReplicasOf(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, ports ...corev1.ContainerPort) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar"}, {Name: "manager", Ports: ports}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	deleting := pod("op-d", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{}
	got := replicasOf([]corev1.Pod{
		pod("op-b", corev1.PodRunning, corev1.ContainerPort{Name: "metrics", ContainerPort: 8443}, corev1.ContainerPort{Name: "debug", ContainerPort: 9444}),
		pod("op-a", corev1.PodRunning, corev1.ContainerPort{Name: "metrics", ContainerPort: 8443}),
		pod("op-c", corev1.PodPending),
		deleting,
	})
	want := []replica{{name: "op-a", pod: "op-a", port: 8444}, {name: "op-b", pod: "op-b", port: 9444}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replicas = %+v, want %+v", got, want)
	}
}

// replicaServer is a replica's debug endpoint, with a certificate of ca: it
// answers rows only to the bearer token "tok".
func replicaServer(t *testing.T, ca pki.Authority, rows ...debug.ProxyRow) string {
	t.Helper()
	leaf, err := pki.IssueServer(ca, []string{"localhost", "127.0.0.1"}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != debug.ProxiesPath || r.URL.Query().Get("namespace") != "team" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(debug.ProxyList{Proxies: rows})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the impostor's refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// Every replica given is asked, with the kubeconfig's credentials, over TLS
// verified with the published CA; their rows are merged; a replica that
// cannot be reached, or whose certificate is not of the CA, is a warning.
func TestConnectAndMerge(t *testing.T) {
	ctx := context.Background()
	newCA := func() pki.Authority {
		a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ca, stranger := newCA(), newCA()
	a := replicaServer(t, ca, debug.ProxyRow{Node: "p2", Fleet: "team/edge", Replica: "op-a"})
	b := replicaServer(t, ca, debug.ProxyRow{Node: "p1", Fleet: "team/edge", Replica: "op-b"})
	impostor := replicaServer(t, stranger, debug.ProxyRow{Node: "fake", Fleet: "team/edge", Replica: "op-x"})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()

	published := authority.PublishedConfigMap(types.NamespacedName{Namespace: "ops", Name: authority.DefaultConfigMapName}, ca.Bundle())
	var stderr bytes.Buffer
	e := &endpoint{config: &rest.Config{BearerToken: "tok"}, clientset: fake.NewClientset(published), namespace: "ops",
		addresses: []string{a, dead, impostor, b}, stderr: &stderr}
	conns, err := e.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(conns)
	rows, err := collectProxies(ctx, conns, url.Values{"namespace": {"team"}}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Node+"@"+r.Replica)
	}
	if want := []string{"p1@op-b", "p2@op-a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	warnings := stderr.String()
	for _, want := range []string{"replica " + dead + ": ", "replica " + impostor + ": ", "certificate signed by unknown authority"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("no warning %q in:\n%s", want, warnings)
		}
	}

	// Without the published CA, nothing is asked.
	e.clientset = fake.NewClientset()
	if _, err := e.connect(ctx); err == nil || !strings.Contains(err.Error(), authority.DefaultConfigMapName) {
		t.Errorf("without the CA ConfigMap: %v", err)
	}
}
