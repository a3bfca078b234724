package loadbalancer_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/loadbalancer"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

var cs kubernetes.Interface

// lbRange is the tests' own: no pods' network takes it (theirs are
// 127.1.0.0/16 to 127.64.0.0/16), so a make run beside them does not meet
// them.
var lbRange = netip.MustParsePrefix("127.200.0.0/16")

func TestMain(m *testing.M) { testenv.MainClientset(m, &cs) }

// run starts a controller for ns, stopped when the test ends; a failure it
// reports fails the test, but a connection no endpoint took.
func run(t *testing.T, ns string) *loadbalancer.Controller {
	ctx, cancel := context.WithCancel(context.Background())
	c := &loadbalancer.Controller{Client: cs, Namespace: ns, Range: lbRange, Report: func(err error) {
		t.Errorf("controller: %v", err)
	}}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return c
}

// pod is a pod's own network namespace whose port 3000 answers its name.
func pod(t *testing.T, ns, name, ip string) {
	testenv.Require(t, podnet.Root())
	p, err := podnet.AddPod(ns, name, ip)
	if err != nil {
		t.Fatal(err)
	}
	l, err := podnet.Listen(p.Netns, "0.0.0.0:3000")
	if err != nil {
		t.Fatal(errors.Join(err, p.Remove()))
	}
	t.Cleanup(func() {
		_ = l.Close()
		if err := p.Remove(); err != nil {
			t.Error(err)
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintln(c, name)
			_ = c.Close()
		}
	}()
}

func namespace(t *testing.T) string {
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lb-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// lbPort is the Services' port, where their load balancers listen: not a
// sample's (8080), which the end-to-end suite's Envoys hold on every address
// of this host while make test runs the Go tests.
const lbPort = 18180

func service(t *testing.T, ns string) *corev1.Service {
	svc, err := cs.CoreV1().Services(ns).Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: lbPort, TargetPort: intstr.FromInt32(3000)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// endpoints sets the Service web's EndpointSlice to ready pods at ips.
func endpoints(t *testing.T, ns string, ips ...string) {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](3000), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	ctx := context.Background()
	old, err := cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, s.Name, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = old.ResourceVersion
		_, err = cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{})
	} else {
		_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// address waits for the Service's status to hold an address of the range.
func address(t *testing.T, ns string) string {
	var addr string
	testenv.Eventually(t, "an address in the Service's status", func() (bool, error) {
		svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		in := svc.Status.LoadBalancer.Ingress
		if len(in) == 0 {
			return false, nil
		}
		a, err := netip.ParseAddr(in[0].IP)
		if err != nil || !lbRange.Contains(a) || a == netip.MustParseAddr("127.0.0.1") {
			return false, testenv.Unexpected("status.loadBalancer.ingress: %+v", in)
		}
		addr = a.String()
		return true, nil
	})
	return addr
}

// answer is what a connection to addr reads, or an error.
func answer(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// A Service of type LoadBalancer gets an address; connections to it reach
// its ready endpoints in turn, as the EndpointSlice changes.
func TestForwardsToEndpoints(t *testing.T) {
	ns := namespace(t)
	pod(t, ns, "a", "10.0.251.1")
	pod(t, ns, "b", "10.0.251.2")
	c := run(t, ns)
	service(t, ns)
	endpoints(t, ns, "10.0.251.1")
	addr := address(t, ns)
	if got := c.Address(ns, "web"); got != addr {
		t.Errorf("Address = %q, status says %q", got, addr)
	}
	target := net.JoinHostPort(addr, strconv.Itoa(lbPort))
	testenv.Eventually(t, "pod a to answer at "+target, func() (bool, error) {
		got, err := answer(target)
		return got == "a", err
	})
	endpoints(t, ns, "10.0.251.1", "10.0.251.2")
	var mu sync.Mutex
	seen := map[string]bool{}
	testenv.Eventually(t, "pods a and b to answer at "+target, func() (bool, error) {
		got, err := answer(target)
		if err != nil {
			return false, err
		}
		mu.Lock()
		defer mu.Unlock()
		seen[got] = true
		return seen["a"] && seen["b"], nil
	})
	endpoints(t, ns, "10.0.251.2")
	testenv.Eventually(t, "pod b alone to answer at "+target, func() (bool, error) {
		for range 4 {
			if got, err := answer(target); got != "b" {
				return false, err
			}
		}
		return true, nil
	})
}

// A Service that changes type, then one that goes, frees its address and
// closes its listeners; the first's status no longer holds the address.
func TestReleases(t *testing.T) {
	ns := namespace(t)
	pod(t, ns, "c", "10.0.251.3")
	c := run(t, ns)
	svc := service(t, ns)
	endpoints(t, ns, "10.0.251.3")
	addr := address(t, ns)
	target := net.JoinHostPort(addr, strconv.Itoa(lbPort))
	testenv.Eventually(t, "pod c to answer at "+target, func() (bool, error) {
		got, err := answer(target)
		return got == "c", err
	})
	ctx := context.Background()
	svc, err := cs.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	svc.Spec.Ports[0].NodePort = 0
	if _, err := cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the address released and out of the status", func() (bool, error) {
		got, err := cs.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return c.Address(ns, "web") == "" && len(got.Status.LoadBalancer.Ingress) == 0, nil
	})
	if _, err := net.DialTimeout("tcp", target, 5*time.Second); err == nil {
		t.Errorf("%s still accepts connections", target)
	}

	svc.Name = "db"
	svc.ResourceVersion = ""
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "an address for db", func() (bool, error) {
		return c.Address(ns, "db") != "", nil
	})
	db := net.JoinHostPort(c.Address(ns, "db"), strconv.Itoa(lbPort))
	if err := cs.CoreV1().Services(ns).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "db's address released", func() (bool, error) {
		return c.Address(ns, "db") == "", nil
	})
	if _, err := net.DialTimeout("tcp", db, 5*time.Second); err == nil {
		t.Errorf("%s still accepts connections", db)
	}
}
