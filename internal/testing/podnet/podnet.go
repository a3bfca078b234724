// Package podnet answers for a cluster's pods on this host. KWOK's pods run
// nothing; hack/podnet.sh routes their addresses into a network namespace
// where every address of the pods' range is local: one of several pods'
// networks (Network), so that suites run at once do not meet. Listen opens a listener
// in that namespace, and Backend answers there as the pod whose address a
// connection reached, as a pod running agnhost's netexec would: so a fleet's
// Envoys, running here as processes, send real requests to the pods behind a
// Service through its EndpointSlices.
//
// A pod that runs a process of its own (an Envoy, a test backend) gets a
// network namespace of its own instead (AddPod), as a CNI would give it: its
// address is then its namespace's alone, on the host's /32 route, and two
// pods bind the same port without meeting. Invariant: an address answers in
// one namespace only, the pod's own or, for every other address of the
// range, its network's.
//
// It needs root, as hack/podnet.sh does.
package podnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Network is one of this host's pods' networks (hack/podnet.sh, PODNET=N).
// Suites that run at once each take a network of their own, so that their
// clusters' pods, their namespaces and their load balancers never meet.
// Network N is the namespace kec-pods (N = 0) or kec-pods-N, where
// 10.N.0.0/16 is routed (the pod CIDR of the cluster hack/cluster.sh makes
// with the same PODNET); its link to the host is kecpodsh<N> on the host,
// 169.254.99.(4N+1)/30, and kecpodsn<N> in the namespace, 169.254.99.(4N+2);
// its load balancers take 127.(N+1).0.0/16. hack/podnet.sh derives the same
// names from the same N (TestNetworkAsTheScriptMakesIt).
type Network int

// Networks is how many there are: N is 0 to Networks-1.
const Networks = 64

// Current returns the network this process was given: $PODNET, or 0.
func Current() (Network, error) {
	v := os.Getenv("PODNET")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= Networks {
		return 0, fmt.Errorf("PODNET=%q: want a pods' network from 0 to %d", v, Networks-1)
	}
	return Network(n), nil
}

// NetworkOf returns the network whose range holds ip.
func NetworkOf(ip netip.Addr) (Network, bool) {
	if !ip.Is4() {
		return 0, false
	}
	b := ip.As4()
	if b[0] != 10 || int(b[1]) >= Networks {
		return 0, false
	}
	return Network(b[1]), true
}

// Namespace is the network namespace of n.
func (n Network) Namespace() string {
	if n == 0 {
		return "kec-pods"
	}
	return fmt.Sprintf("kec-pods-%d", n)
}

// CIDR is the pods' range routed to n.
func (n Network) CIDR() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n), 0, 0}), 16)
}

// LoadBalancers is where n's Services of type LoadBalancer take their
// addresses (internal/testing/loadbalancer).
func (n Network) LoadBalancers() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(n) + 1, 0, 0}), 16)
}

// hostAddr is the host's end of n's link; link is the namespace's end.
func (n Network) hostAddr() string { return fmt.Sprintf("169.254.99.%d", 4*int(n)+1) }
func (n Network) link() string     { return fmt.Sprintf("kecpodsn%d", n) }

// Available reports whether the pods' network is up on this host.
func Available(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

// Listen opens a TCP listener on addr in the network namespace ns. The
// calling goroutine's thread enters ns only for the socket's creation.
func Listen(ns, addr string) (net.Listener, error) {
	var l net.Listener
	err := In(ns, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil && l != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, err
}

// Dial opens a TCP connection to addr from the network namespace ns.
func Dial(ns, addr string) (net.Conn, error) {
	var c net.Conn
	err := In(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, 10*time.Second)
		return err
	})
	if err != nil && c != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, err
}

// In calls f on a thread that is in the network namespace ns for the
// call's time: the sockets f makes stay in ns.
func In(ns string, f func() error) error {
	target, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", ns, err)
	}
	defer func() { _ = target.Close() }()
	runtime.LockOSThread()
	own, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = own.Close() }()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering network namespace %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays in ns: keep it locked, and it ends with the goroutine.
		return errors.Join(ferr, fmt.Errorf("leaving network namespace %s: %w", ns, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Pods finds the pod that has an address, among a namespace's Running pods,
// from a list at most a second old.
type Pods struct {
	Client    kubernetes.Interface
	Namespace string

	mu     sync.Mutex
	listed time.Time
	byIP   map[string]*corev1.Pod
}

// ByIP returns the Running pod whose address ip is, or nil.
func (p *Pods) ByIP(ctx context.Context, ip string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.listed) > time.Second {
		list, err := p.Client.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		p.byIP = map[string]*corev1.Pod{}
		for i := range list.Items {
			pod := &list.Items[i]
			if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
				for _, a := range pod.Status.PodIPs {
					p.byIP[a.IP] = pod
				}
			}
		}
		p.listed = time.Now()
	}
	return p.byIP[ip], nil
}

// Backend answers HTTP as the pod whose address the request reached: with
// the pod's name, as agnhost netexec's /hostname does, on every path, and
// with the headers X-Pod (its name) and X-Track (its label track, as the
// samples use it). A request to an address no Running pod has is refused
// with 503: the pod is gone.
func Backend(pods *Pods) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		host, _, _ := net.SplitHostPort(fmt.Sprint(local))
		pod, err := pods.ByIP(r.Context(), host)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case pod == nil:
			http.Error(w, "no pod at "+host, http.StatusServiceUnavailable)
		default:
			w.Header().Set("X-Pod", pod.Name)
			w.Header().Set("X-Track", pod.Labels["track"])
			_, _ = fmt.Fprintln(w, pod.Name)
		}
	})
}

// Serve answers as Backend on each of ports, on every pod address, until
// ctx ends.
func Serve(ctx context.Context, ns string, pods *Pods, ports ...int) error {
	var servers []*http.Server
	for _, port := range ports {
		l, err := Listen(ns, fmt.Sprintf("0.0.0.0:%d", port))
		if err != nil {
			for _, s := range servers {
				_ = s.Close()
			}
			return err
		}
		s := &http.Server{Handler: Backend(pods), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		go func() { _ = s.Serve(l) }()
	}
	go func() {
		<-ctx.Done()
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	return nil
}
