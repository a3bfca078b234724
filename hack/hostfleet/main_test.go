package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/echopods"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// With --load-balancers and --echo-basic, a Service of type LoadBalancer in
// front of an echo pod answers at its own address as that pod; interrupted,
// hostfleet leaves no pod's network namespace.
func TestLoadBalancerToEchoPod(t *testing.T) {
	echo, err := echopods.Binary()
	if err == nil {
		err = podnet.Root()
	}
	testenv.Require(t, err)
	_, cs := testenv.StartClientset(t)
	// A pods' network no suite takes, for its load balancers' range, and
	// a port no sample listens on: a make run's Envoys beside this test
	// listen on 8080 of every address.
	t.Setenv("PODNET", "61")
	const port = 18080

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, cs, "default", "", "127.0.0.1:18000", "envoy", t.TempDir(), "", false, true, true, echo)
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hostfleet: %v", err)
		}
	}
	t.Cleanup(stop)

	bg := context.Background()
	pod, err := cs.CoreV1().Pods("default").Create(bg, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-7c9d-xyz12", Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "echo", Image: "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
			Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.254.1", PodIPs: []corev1.PodIP{{IP: "10.0.254.1"}}}
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(bg, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services("default").Create(bg, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(3000)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("default").Create(bg, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-1", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](3000)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.254.1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	// The pod first, so that the load balancer's connections find it up.
	testenv.Eventually(t, "the echo pod to answer at its address", func() (bool, error) {
		resp, err := client.Get("http://10.0.254.1:3000/")
		if err != nil {
			return false, err
		}
		return true, resp.Body.Close()
	})
	var url string
	testenv.Eventually(t, "the Service's address", func() (bool, error) {
		svc, err := cs.CoreV1().Services("default").Get(bg, "echo", metav1.GetOptions{})
		if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		ip := svc.Status.LoadBalancer.Ingress[0].IP
		if !strings.HasPrefix(ip, "127.62.") {
			return false, testenv.Unexpected("the Service's address %s is not of the pods' network 61's range, 127.62.0.0/16", ip)
		}
		url = "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/"
		return true, nil
	})
	testenv.Eventually(t, "the echo pod to answer at "+url, func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		var got struct{ Pod string }
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			return false, err
		}
		if got.Pod != pod.Name {
			return false, testenv.Unexpected("%s answered as pod %q", url, got.Pod)
		}
		return true, nil
	})

	stop()
	netns, _ := podnet.PodNames("default", pod.Name, pod.Status.PodIP)
	if _, err := os.Stat(filepath.Join("/run/netns", netns)); !os.IsNotExist(err) {
		t.Errorf("%s: %v", netns, fmt.Sprint(err))
	}
}
