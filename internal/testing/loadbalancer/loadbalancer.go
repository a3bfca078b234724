// Package loadbalancer does a cloud's load balancer controller's part on
// this host: every Service of type LoadBalancer gets an address of its own
// from the controller's Range (127.(N+1).0.0/16 for the pods' network N:
// podnet.Network.LoadBalancers), written to
// status.loadBalancer.ingress[0].ip, and a TCP
// listener on that address for each of its TCP ports, which forwards each
// connection to a ready endpoint of the Service (its EndpointSlices: the
// pod's address and the port's target port), in turn.
//
// Invariant: an address belongs to one Service for as long as the Service
// lives with type LoadBalancer, and is never 127.0.0.1; when the Service goes
// or changes type, its listeners are closed and the address is free again.
// A Service whose status already holds a free address of the range (a
// controller before this one) keeps it.
//
// Ports below 1024 need root (or CAP_NET_BIND_SERVICE).
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller gives the Services of type LoadBalancer their addresses and
// forwards their traffic until Run's context ends.
type Controller struct {
	Client kubernetes.Interface
	// Namespace holds the Services; empty, every namespace.
	Namespace string
	// Range is where the Services' addresses come from: a range of the
	// loopback interface without 127.0.0.1, this controller's alone.
	// Required.
	Range netip.Prefix
	// Report is told of each failure: to serve a Service (which is
	// retried; a status write that conflicts with a change the cache has
	// yet to see is retried without a word), and to reach every endpoint
	// for a connection (which is closed). Required.
	Report func(error)

	mu   sync.Mutex
	lbs  map[string]*balancer // by namespace/name
	used map[netip.Addr]bool
}

// Address returns the address of the Service namespace/name, or "".
func (c *Controller) Address(namespace, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.lbs[namespace+"/"+name]; b != nil {
		return b.addr.String()
	}
	return ""
}

// Run serves the Services until ctx ends, then closes every listener; the
// Services' status stays, as a load balancer outlives its controller.
func (c *Controller) Run(ctx context.Context) error {
	if c.Report == nil {
		return errors.New("loadbalancer: Controller.Report is nil")
	}
	if r := c.Range; !r.IsValid() || r != r.Masked() || !r.Addr().IsLoopback() || r.Bits() > 30 || r.Contains(netip.MustParseAddr("127.0.0.1")) {
		return fmt.Errorf("loadbalancer: Controller.Range %s is not a range of the loopback interface without 127.0.0.1", r)
	}
	c.mu.Lock()
	c.lbs, c.used = map[string]*balancer{}, map[netip.Addr]bool{}
	c.mu.Unlock()
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(c.Namespace))
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			c.Report(fmt.Errorf("loadbalancer: %w", err))
			return
		}
		queue.Add(key)
	}
	if _, err := services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	slices.Informer() // registered before Start
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil // ctx ended first: nothing was served
		}
	}
	defer c.closeAll()
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return nil
		}
		err := c.sync(ctx, key, services.Lister(), slices.Lister())
		switch {
		case err != nil && ctx.Err() == nil && (apierrors.IsConflict(err) || apierrors.IsNotFound(err)):
			// The status was written over a Service changed or deleted
			// since the cache saw it: the cache's news brings it again.
			queue.AddRateLimited(key)
		case err != nil && ctx.Err() == nil:
			c.Report(fmt.Errorf("loadbalancer: Service %s: %w", key, err))
			queue.AddRateLimited(key)
		default:
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

func (c *Controller) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, b := range c.lbs {
		b.close()
		delete(c.used, b.addr)
		delete(c.lbs, key)
	}
}

// sync makes the Service of key served as its spec says, or released.
func (c *Controller) sync(ctx context.Context, key string, services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.release(key)
		return nil
	} else if err != nil {
		return err
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		c.release(key)
		if ours(svc, c.Range) {
			return c.writeStatus(ctx, svc, nil)
		}
		return nil
	}
	b, err := c.serve(key, svc, slices)
	if err != nil {
		return err
	}
	want := []corev1.LoadBalancerIngress{{IP: b.addr.String()}}
	if in := svc.Status.LoadBalancer.Ingress; len(in) == 1 && in[0].IP == want[0].IP && in[0].Hostname == "" {
		return nil
	}
	return c.writeStatus(ctx, svc, want)
}

// ours reports whether svc's status holds an address of r.
func ours(svc *corev1.Service, r netip.Prefix) bool {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && r.Contains(a) {
			return true
		}
	}
	return false
}

func (c *Controller) writeStatus(ctx context.Context, svc *corev1.Service, ingress []corev1.LoadBalancerIngress) error {
	svc = svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = ingress
	_, err := c.Client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	return err
}

// serve returns the Service's balancer, made or with its listeners brought
// to the Service's TCP ports.
func (c *Controller) serve(key string, svc *corev1.Service, slices discoverylisters.EndpointSliceLister) (*balancer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ports := tcpPorts(svc)
	if b := c.lbs[key]; b != nil {
		return b, b.listen(ports)
	}
	var last error
	for _, addr := range candidates(svc, c.Range, c.used) {
		b := &balancer{addr: addr, namespace: svc.Namespace, service: svc.Name, slices: slices,
			report: c.Report, listeners: map[int32]*listener{}}
		if last = b.listen(ports); last != nil {
			// Another process may hold the address: try the next.
			b.close()
			continue
		}
		c.lbs[key], c.used[addr] = b, true
		return b, nil
	}
	return nil, fmt.Errorf("no address of %s to listen on: %w", c.Range, last)
}

// candidates are the addresses svc may take, in order: the one its status
// holds, if free, then the free addresses of r from the lowest.
func candidates(svc *corev1.Service, r netip.Prefix, used map[netip.Addr]bool) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && r.Contains(a) && !used[a] && a != r.Addr() {
			out = append(out, a)
		}
	}
	for a := r.Addr().Next(); r.Contains(a) && len(out) < 64; a = a.Next() {
		if !used[a] && !(len(out) > 0 && out[0] == a) {
			out = append(out, a)
		}
	}
	return out
}

func tcpPorts(svc *corev1.Service) map[int32]string {
	ports := map[int32]string{}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			ports[p.Port] = p.Name
		}
	}
	return ports
}

func (c *Controller) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.lbs[key]; b != nil {
		b.close()
		delete(c.used, b.addr)
		delete(c.lbs, key)
	}
}
