package main

import (
	"context"
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/announce"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/authority"
)

// versions runs the plugin's version -o json with args, and returns the
// operator's lines as "replica: version" or "replica: error".
func versions(t *testing.T, args ...string) []string {
	t.Helper()
	_, stdout, stderr := runPlugin(t, "", append([]string{"version", "-o", "json"}, args...)...)
	var out struct{ Versions []versionLine }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("version: %v\n%s\n%s", err, stdout, stderr)
	}
	var lines []string
	for _, l := range out.Versions {
		if l.Component != "operator" {
			continue
		}
		if l.Error != "" {
			lines = append(lines, l.Replica+": "+l.Error)
			continue
		}
		lines = append(lines, l.Replica+": "+l.Version)
	}
	return lines
}

// An operator run on a host, without pods, records its debug endpoint's
// loopback address in a Lease of its namespace, and kubectl envoy, given
// no address, finds it there: it reaches the real endpoint over TLS
// verified with the published CA, as the kubeconfig's user. Records of
// addresses that are not loopback IP addresses are not dialed; a record
// left by a killed replica is asked, and is a warning. While the operator
// has a pod, the records are not read. The record goes when the replica
// stops.
func TestPluginFindsTheOperatorRunOnThisHost(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(suite.Manager.GetConfig())
	// An operator's namespace of the test's own, with the CA certificates
	// the suite's debug endpoint presents a certificate of.
	opNS := suite.Namespace(t)
	ca, err := admin.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, authority.DefaultConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps(opNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ca.Name}, Data: ca.Data},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A user who may read, in the operator's namespace, its pods, the
	// Leases and the CA certificates.
	kubeconfig := user(t, opNS, "developer", rule("", "pods", "list"), rule("coordination.k8s.io", "leases", "list"), rule("", "configmaps", "get"))
	args := []string{"--kubeconfig", kubeconfig, "--operator-namespace", opNS}
	v := versionOf(t, kubeconfig, opNS)

	// Nothing recorded: the plugin says where it looked.
	got := versions(t, args...)
	if len(got) != 1 || !strings.Contains(got[0], "no pod of the operator") || !strings.Contains(got[0], "records its debug endpoint there (Leases "+announce.Selector+")") {
		t.Errorf("without pods or records: %q", got)
	}

	// The replica records its address once its endpoint listens.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	a := announce.New(announce.Options{Client: admin, Namespace: opNS, Replica: "replica-a", Addr: debugServer.Addr, Log: ctrl.Log.WithName("announce")})
	go func() { done <- a.Start(runCtx) }()
	leaseName := announce.LeaseName("replica-a")
	testenv.Eventually(t, "the replica's Lease", func() (bool, error) {
		_, err := admin.CoordinationV1().Leases(opNS).Get(ctx, leaseName, metav1.GetOptions{})
		return err == nil, client404(err)
	})
	if got, want := versions(t, args...), []string{"replica-a: " + v}; !reflect.DeepEqual(got, want) {
		t.Errorf("with the replica's record: %q, want %q", got, want)
	}

	// Records that are no loopback IP address are not dialed; a record of
	// a replica that was killed, at a port nothing listens on, is asked.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	for name, addr := range map[string]string{"remote": "192.0.2.1:8444", "named": "localhost:8444", "killed": dead} {
		record := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: announce.LeaseName(name),
			Labels:      map[string]string{announce.NameLabel: announce.NameValue, announce.ComponentLabel: announce.ComponentValue},
			Annotations: map[string]string{announce.AddressAnnotation: addr}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name)}}
		if _, err := admin.CoordinationV1().Leases(opNS).Create(ctx, record, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got = versions(t, args...)
	if len(got) != 2 || !strings.HasPrefix(got[0], "killed: ") || !strings.Contains(got[0], dead) || !strings.Contains(got[0], "connection refused") ||
		got[1] != "replica-a: "+v {
		t.Errorf("with records of a killed replica and of addresses off loopback: %q", got)
	}

	// The operator has a pod: it is reached through its pods only (this
	// one is not running, since no kubelet runs it).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "operator", Labels: map[string]string{"app.kubernetes.io/name": "kube-envoy-controller"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "kube-envoy-controller"}}}}
	if _, err := admin.CoreV1().Pods(opNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = versions(t, args...)
	if len(got) != 1 || !strings.Contains(got[0], "no running pod of the operator") {
		t.Errorf("with a pod of the operator: %q", got)
	}
	if err := admin.CoreV1().Pods(opNS).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the operator's pod to go", func() (bool, error) {
		_, err := admin.CoreV1().Pods(opNS).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	// --operator-address still reaches the address given, and only it.
	if got, want := versions(t, append(args, "--operator-address", dead)...), []string{dead + ": "}; len(got) != 1 || !strings.HasPrefix(got[0], want[0]) {
		t.Errorf("with --operator-address: %q, want one line of %s", got, dead)
	}

	// The replica stops: its record goes, the others stay.
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoordinationV1().Leases(opNS).Get(ctx, leaseName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stopped replica's Lease: %v", err)
	}
	if got := versions(t, args...); len(got) != 1 || !strings.HasPrefix(got[0], "killed: ") {
		t.Errorf("after the replica stopped: %q", got)
	}
}

// versionOf is the suite's operator's version, as its endpoint reports it
// when given its address.
func versionOf(t *testing.T, kubeconfig, opNS string) string {
	t.Helper()
	got := versions(t, "--kubeconfig", kubeconfig, "--operator-namespace", opNS, "--operator-address", operatorAddress(t))
	if len(got) != 1 || !strings.HasPrefix(got[0], "replica-a: ") {
		t.Fatalf("the suite's endpoint, at its address: %q", got)
	}
	return strings.TrimPrefix(got[0], "replica-a: ")
}

// client404 is err, unless it says the object is not there yet.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
