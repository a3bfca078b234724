package loadbalancer

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// balancer is one Service's address and its listeners, by port.
type balancer struct {
	addr               netip.Addr
	namespace, service string
	slices             discoverylisters.EndpointSliceLister
	report             func(error)
	listeners          map[int32]*listener
}

// listener forwards the connections of one port of the Service.
type listener struct {
	net.Listener
	portName atomic.Value // string: the Service port's name
	next     atomic.Uint64
}

// listen brings b's listeners to ports (port: its name), opening the new
// ones and closing those no longer there.
func (b *balancer) listen(ports map[int32]string) error {
	for port, l := range b.listeners {
		if _, ok := ports[port]; !ok {
			_ = l.Close()
			delete(b.listeners, port)
		}
	}
	for port, name := range ports {
		if l := b.listeners[port]; l != nil {
			l.portName.Store(name)
			continue
		}
		nl, err := net.Listen("tcp", net.JoinHostPort(b.addr.String(), strconv.Itoa(int(port))))
		if err != nil {
			return err
		}
		l := &listener{Listener: nl}
		l.portName.Store(name)
		b.listeners[port] = l
		go b.accept(l)
	}
	return nil
}

func (b *balancer) close() {
	for port, l := range b.listeners {
		_ = l.Close()
		delete(b.listeners, port)
	}
}

func (b *balancer) accept(l *listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return // closed
		}
		go b.forward(l, c)
	}
}

// forward joins c to the next ready endpoint that answers.
func (b *balancer) forward(l *listener, c net.Conn) {
	defer func() { _ = c.Close() }()
	name, _ := l.portName.Load().(string)
	eps, err := b.endpoints(name)
	if err != nil {
		b.report(fmt.Errorf("loadbalancer: Service %s/%s: %w", b.namespace, b.service, err))
		return
	}
	if len(eps) == 0 {
		return // no ready endpoint: refused, as a cloud's load balancer would
	}
	start := l.next.Add(1) - 1
	var up net.Conn
	for i := range eps {
		ep := eps[(start+uint64(i))%uint64(len(eps))]
		if up, err = net.DialTimeout("tcp", ep, 5*time.Second); err == nil {
			break
		}
	}
	if up == nil {
		b.report(fmt.Errorf("loadbalancer: Service %s/%s at %s: no endpoint answers: %w", b.namespace, b.service, l.Addr(), err))
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		closeWrite(up)
		close(done)
	}()
	_, _ = io.Copy(c, up)
	closeWrite(c)
	<-done
}

// closeWrite half-closes a TCP connection: the peer reads its end.
func closeWrite(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.CloseWrite()
	}
}

// endpoints are the ready endpoints of the Service's port name, as
// host:port, in a stable order.
func (b *balancer) endpoints(portName string) ([]string, error) {
	list, err := b.slices.EndpointSlices(b.namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: b.service}))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list {
		var port *int32
		for _, p := range s.Ports {
			if p.Port != nil && ptrName(p.Name) == portName && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
				port = p.Port
			}
		}
		if port == nil || s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 || e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			out = append(out, net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(*port))))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func ptrName(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
