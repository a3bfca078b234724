package realenvoy

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/pki"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// Two proxies of one fleet, each in its pod's own network namespace, bind
// the same admin port, each answers at its pod's address as itself, and
// each completes the mutual TLS handshake of its xDS cluster, unchanged,
// with an xDS server given on the host's loopback, from its pod's address.
func TestRunPod(t *testing.T) {
	bin := Require(t)
	testenv.Require(t, podnet.Root())
	// The xDS server stands in as a listener on every address of the host,
	// as the operator's listens, with a certificate for the name the
	// proxies verify, from the authority of their client certificate: it
	// records who completed the handshake, and with which server name.
	e := gateway()
	a, _, err := pki.Rotate(pki.Authority{}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	server, err := pki.IssueServer(a, []string{builtin.XDS.Host}, time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(server.Cert, server.Key)
	if err != nil {
		t.Fatal(err)
	}
	xds, err := tls.Listen("tcp", ":0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: a.Pool(), MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = xds.Close() })
	var mu sync.Mutex
	shook := map[string]string{} // the proxy's address: the server name it asked for
	go func() {
		for {
			c, err := xds.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					return // the proxy's Envoy logs why, and the wait below fails
				}
				host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
				mu.Lock()
				shook[host] = tc.ConnectionState().ServerName
				mu.Unlock()
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(xds.Addr().String())

	leaf, err := pki.IssueClient(a, fleet.Of(e), time.Now(), pki.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	pod, cms, _ := fleetPod(t, e, builtin)
	secrets := map[string]*corev1.Secret{fleet.ClientSecretName(e): {ObjectMeta: metav1.ObjectMeta{Name: fleet.ClientSecretName(e)},
		Data: map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": a.Bundle()}}}
	var procs []*Process
	for i, ip := range []string{"10.0.253.1", "10.0.253.2"} {
		pod := pod.DeepCopy()
		pod.Name += string(rune('a' + i))
		net, err := podnet.AddPod(pod.Namespace, pod.Name, ip)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := net.Remove(); err != nil {
				t.Error(err)
			}
		})
		p, err := FromPod(pod, cms, secrets)
		if err != nil {
			t.Fatal(err)
		}
		root := filepath.Join(t.TempDir(), pod.Name)
		log, err := os.Create(root + ".log")
		if err != nil {
			t.Fatal(err)
		}
		proc, err := RunPod(bin, p, net, root, "127.0.0.1:"+port, false, log)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanups run last first: Envoy stops before its namespace goes.
		t.Cleanup(func() { proc.Stop(5 * time.Second); _ = log.Close() })
		if want := "http://" + ip + ":19000"; proc.Admin != want {
			t.Errorf("Admin = %s, want %s", proc.Admin, want)
		}
		procs = append(procs, proc)
	}
	for _, proc := range procs {
		testenv.Eventually(t, "Envoy "+proc.Pod+" to answer at "+proc.Admin, func() (bool, error) {
			if done, err := proc.Exited(); done {
				return false, testenv.Unexpected("Envoy %s exited: %v", proc.Pod, err)
			}
			info, err := proc.Get(context.Background(), "/server_info")
			if err != nil {
				return false, err
			}
			if !strings.Contains(info, `"id": "`+proc.Pod+`"`) {
				return false, testenv.Unexpected("%s answers as another: %s", proc.Admin, info)
			}
			return true, nil
		})
		ip := strings.TrimSuffix(strings.TrimPrefix(proc.Admin, "http://"), ":19000")
		testenv.Eventually(t, "Envoy "+proc.Pod+" to complete its TLS handshake with the xDS server from "+ip, func() (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			name, ok := shook[ip]
			if ok && name != builtin.XDS.Host {
				return false, testenv.Unexpected("Envoy %s asked for the server name %q", proc.Pod, name)
			}
			return ok, nil
		})
	}
}

// A Kubelet with PodNetwork runs a fleet's pod in its own network
// namespace, its admin at the pod's address, and once the pod is gone,
// stops its Envoy and removes the namespace.
func TestKubeletPodNetwork(t *testing.T) {
	bin := Require(t)
	testenv.Require(t, podnet.Root())
	_, cs := testenv.StartClientset(t)
	e := gateway()
	e.Spec.DrainSeconds = ptr.To[int32](1)
	pod, cms, secrets := fleetPod(t, e, builtin)
	ctx := context.Background()
	for _, cm := range cms {
		cm.Namespace, cm.OwnerReferences = pod.Namespace, nil
		if _, err := cs.CoreV1().ConfigMaps(pod.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range secrets {
		s.Namespace, s.OwnerReferences = pod.Namespace, nil
		if _, err := cs.CoreV1().Secrets(pod.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.253.3", PodIPs: []corev1.PodIP{{IP: "10.0.253.3"}}}
	if _, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	k := &Kubelet{Client: cs, Namespace: pod.Namespace, Envoy: bin, XDS: "127.0.0.1:18000", Dir: t.TempDir(), PodNetwork: true}
	t.Cleanup(func() {
		k.StopAll()
		if err := k.NetworkErrors(); err != nil {
			t.Error(err)
		}
	})
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	proc := k.Processes()[pod.Name]
	if proc == nil || proc.Admin != "http://10.0.253.3:19000" {
		t.Fatalf("Processes()[%s] = %+v", pod.Name, proc)
	}
	testenv.Eventually(t, "Envoy to answer at "+proc.Admin, func() (bool, error) {
		if done, err := proc.Exited(); done {
			return false, testenv.Unexpected("Envoy exited: %v", err)
		}
		info, err := proc.Get(ctx, "/server_info")
		return err == nil && strings.Contains(info, `"id": "`+pod.Name+`"`), err
	})

	if err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	netns, link := podnet.PodNames(pod.Namespace, pod.Name, pod.Status.PodIP)
	testenv.Eventually(t, "Envoy stopped and the pod's namespace removed", func() (bool, error) {
		if err := k.Sync(ctx); err != nil {
			return false, testenv.Unexpected("Sync: %v", err)
		}
		done, _ := proc.Exited()
		_, nsErr := os.Stat(filepath.Join("/run/netns", netns))
		_, linkErr := net.InterfaceByName(link)
		return done && os.IsNotExist(nsErr) && linkErr != nil, nil
	})
}
