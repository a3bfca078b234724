//go:build install

package install

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// xdsService stands for the operator's xDS Service in front of its
// replicas: each connection goes to the first replica of replicas() that
// accepts it, and ends with it. A replica that dies ends its connections,
// and a proxy that reconnects reaches another one, as through a Service.
type xdsService struct {
	l        net.Listener
	replicas func() []*replica
	wg       sync.WaitGroup
}

func startXDSService(t *testing.T, replicas func() []*replica) *xdsService {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &xdsService{l: l, replicas: replicas}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() { _ = l.Close(); s.wg.Wait() })
	return s
}

func (s *xdsService) addr() string { return s.l.Addr().String() }

func (s *xdsService) serve() {
	defer s.wg.Done()
	for {
		in, err := s.l.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { _ = in.Close() }()
			var out net.Conn
			for _, r := range s.replicas() {
				if !r.running() {
					continue
				}
				if out, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.xds), time.Second); err == nil {
					break
				}
			}
			if out == nil {
				return
			}
			defer func() { _ = out.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}

// realEnvoyFleet is a fleet of one real Envoy on this host, reaching the
// operator through svc, whose listener on a free port answers every request
// with body, with no upstream to depend on.
type realEnvoyFleet struct {
	ns, url string
	port    int
	proc    *realenvoy.Process
}

func startRealEnvoyFleet(t *testing.T, ns string, svc *xdsService) *realEnvoyFleet {
	t.Helper()
	f := &realEnvoyFleet{ns: ns, port: freePort(t)}
	f.url = fmt.Sprintf("http://127.0.0.1:%d/", f.port)
	kubectl.Apply(t, ns, `apiVersion: example.com/v1
kind: Envoy
metadata: {name: real}
spec: {replicas: 1, drainSeconds: 0}
`)
	f.apply(t, "v1")
	cs, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &realenvoy.Kubelet{Client: cs, Namespace: ns, Selector: "app.kubernetes.io/instance=real",
		Envoy: realenvoy.Require(t), XDS: svc.addr(), Dir: t.TempDir()}
	t.Cleanup(k.Start(func(err error) { t.Logf("host proxies: %v", err) }))
	for _, p := range k.WaitLive(t, 1, 2*time.Minute) {
		f.proc = p
	}
	f.waitBody(t, "v1")
	return f
}

// apply applies the fleet's EnvoyConfig, whose listener answers body.
func (f *realEnvoyFleet) apply(t *testing.T, body string) {
	t.Helper()
	kubectl.Apply(t, f.ns, realenvoy.DirectResponse("real-routes", "real", f.port, body))
}

var plainHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (f *realEnvoyFleet) get() (int, string, error) {
	resp, err := plainHTTP.Get(f.url)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (f *realEnvoyFleet) waitBody(t *testing.T, body string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "Envoy to answer "+body, func() (bool, error) {
		code, got, err := f.get()
		return err == nil && code == 200 && got == body, fmt.Errorf("%d %q %v", code, got, err)
	})
}

// traffic sends requests through the fleet's Envoy, one after another, until
// stopped, bounded in count and time.
type traffic struct {
	total, failed atomic.Int64
	first         atomic.Value
	stopped       atomic.Bool
	done          chan struct{}
}

func (f *realEnvoyFleet) startTraffic() *traffic {
	tr := &traffic{done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		deadline := time.Now().Add(5 * time.Minute)
		for i := 0; i < 500000 && !tr.stopped.Load() && time.Now().Before(deadline); i++ {
			code, _, err := f.get()
			if err != nil || code != 200 {
				if tr.failed.Add(1) == 1 {
					tr.first.Store(fmt.Sprintf("%d %v", code, err))
				}
			}
			tr.total.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return tr
}

func (tr *traffic) stop() (total, failed int64, first string) {
	tr.stopped.Store(true)
	<-tr.done
	s, _ := tr.first.Load().(string)
	return tr.total.Load(), tr.failed.Load(), s
}

// connections returns how many connections the Envoy opened to the xDS
// server so far, from its own stat.
func (f *realEnvoyFleet) connections(t *testing.T) int64 {
	t.Helper()
	n, err := f.proc.Stat(context.Background(), "cluster.xds_cluster.upstream_cx_total")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// reconnected follows, from since, the Envoy's own stats every 20 ms, and
// sends how long it took to be connected to a replica again: a connection
// to the xDS server beyond the before it had
// (cluster.xds_cluster.upstream_cx_total), with its stream up
// (control_plane.connected_state). It gives up after two minutes.
func (f *realEnvoyFleet) reconnected(since time.Time, before int64) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		defer close(out)
		for time.Since(since) < 2*time.Minute {
			n, err1 := f.proc.Stat(context.Background(), "cluster.xds_cluster.upstream_cx_total")
			up, err2 := f.proc.Stat(context.Background(), "control_plane.connected_state")
			if err1 == nil && err2 == nil && n > before && up == 1 {
				out <- time.Since(since)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return out
}

// waitReconnected waits for what reconnected sends.
func waitReconnected(t *testing.T, ch <-chan time.Duration) time.Duration {
	t.Helper()
	d, ok := <-ch
	if !ok {
		t.Fatal("the real Envoy was not connected to a replica again within two minutes")
	}
	return d
}
