// Package announce tells kubectl envoy where an operator that runs outside
// the cluster, on a developer's host (make run, the end-to-end suite),
// serves its debug endpoint. In a cluster, the plugin finds the operator's
// pods and forwards a port to each; a host-run operator has no pod, so each
// of its replicas records its debug endpoint's loopback address in a Lease
// of its own in the operator's namespace, and deletes it when it stops.
//
// The record only says where to knock. The plugin reads it only when the
// operator has no pod at all, dials only loopback addresses (a record never
// sends a user's credentials off the host), and, as through port
// forwarding, sends the credentials only to an endpoint whose certificate
// chains to the CA certificates the operator publishes. Only the operator
// and the cluster's administrators may write in the operator's namespace.
//
// The Lease is written once when the replica starts (not at all when it
// already says the same) and never renewed, so that a settled operator
// writes nothing; a replica that is killed leaves its record behind, and
// the plugin then warns that it cannot reach it.
package announce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// NameLabel and ComponentLabel, with their values, mark the Leases.
	NameLabel      = "app.kubernetes.io/name"
	NameValue      = "kube-envoy-controller"
	ComponentLabel = "app.kubernetes.io/component"
	ComponentValue = "debug-endpoint"
	// Selector selects the Leases.
	Selector = NameLabel + "=" + NameValue + "," + ComponentLabel + "=" + ComponentValue
	// AddressAnnotation holds the debug endpoint's address, host:port, with
	// a loopback IP address as its host.
	AddressAnnotation = "kube-envoy-controller.io/debug-address"
	leaseBase         = "kube-envoy-controller-debug-"
)

// LeaseName is the name of replica's Lease.
func LeaseName(replica string) string {
	const maxLen = 253
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, replica)
	name = strings.Trim(leaseBase+name, "-.")
	if name != leaseBase+replica || len(name) > maxLen {
		// Names that differ only in what a name cannot hold stay apart.
		sum := sha256.Sum256([]byte(replica))
		if len(name) > maxLen-9 {
			name = name[:maxLen-9]
		}
		name = strings.Trim(name, "-.") + "-" + hex.EncodeToString(sum[:4])
	}
	return name
}

// Loopback returns addr as host:port when its host is a loopback IP address
// (not a name, which could resolve elsewhere) and its port is in 1..65535.
func Loopback(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	ip := net.ParseIP(host)
	n, err := strconv.ParseUint(port, 10, 16)
	if ip == nil || !ip.IsLoopback() || err != nil || n == 0 {
		return "", false
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(n, 10)), true
}

// Endpoint is a replica's debug endpoint, as its Lease records it.
type Endpoint struct {
	// Replica is the replica's name (the Lease's holder).
	Replica string
	// Lease is the record's name.
	Lease string
	// Address is a loopback host:port.
	Address string
}

// String is the endpoint as warnings name it.
func (e Endpoint) String() string {
	return fmt.Sprintf("%s (Lease %s, at %s)", e.Replica, e.Lease, e.Address)
}

// Endpoints returns the endpoints that leases record, by replica: those of
// Leases with the labels, a holder and a loopback address. The others are
// not dialed.
func Endpoints(leases []coordinationv1.Lease) []Endpoint {
	var out []Endpoint
	for _, l := range leases {
		if l.Labels[NameLabel] != NameValue || l.Labels[ComponentLabel] != ComponentValue || l.DeletionTimestamp != nil {
			continue
		}
		addr, ok := Loopback(l.Annotations[AddressAnnotation])
		if !ok || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		out = append(out, Endpoint{Replica: *l.Spec.HolderIdentity, Lease: l.Name, Address: addr})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Replica != out[j].Replica {
			return out[i].Replica < out[j].Replica
		}
		return out[i].Lease < out[j].Lease
	})
	return out
}

// Options configure an Announcer.
type Options struct {
	// Client writes the Lease.
	Client kubernetes.Interface
	// Namespace is the operator's.
	Namespace string
	// Replica names this replica.
	Replica string
	// Addr waits until the debug endpoint listens, and returns its address.
	Addr func(context.Context) (net.Addr, error)
	Log  logr.Logger
}

// Announcer records, once the debug endpoint listens, where it listens, and
// deletes the record when it stops. Add it to the manager of an operator
// that does not run in a pod.
type Announcer struct {
	o Options
}

// New returns an Announcer.
func New(o Options) *Announcer { return &Announcer{o: o} }

// NeedLeaderElection is false: every replica has its own endpoint.
func (a *Announcer) NeedLeaderElection() bool { return false }

// Start records the address, waits until ctx ends, then deletes the record.
// It fails only when the endpoint does not listen; a record that cannot be
// written is logged: the plugin can still be given the address.
func (a *Announcer) Start(ctx context.Context) error {
	bound, err := a.o.Addr(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	addr, ok := reachable(bound)
	if !ok {
		a.o.Log.Info("the debug endpoint does not listen on a loopback address: its address is not recorded for kubectl envoy", "address", bound.String())
		return nil
	}
	lease, err := a.record(ctx, addr)
	if err != nil {
		a.o.Log.Error(err, "recording the debug endpoint's address for kubectl envoy", "lease", a.o.Namespace+"/"+LeaseName(a.o.Replica))
	} else {
		a.o.Log.Info("recorded the debug endpoint's address for kubectl envoy", "lease", a.o.Namespace+"/"+lease.Name, "address", addr)
	}
	<-ctx.Done()
	if lease == nil {
		return nil
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Only the record this replica wrote: not one a later start replaced.
	err = a.o.Client.CoordinationV1().Leases(a.o.Namespace).Delete(stop, lease.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		a.o.Log.Error(err, "deleting the debug endpoint's record", "lease", a.o.Namespace+"/"+lease.Name)
	}
	return nil
}

// reachable is the loopback address at which an endpoint bound to bound
// is reached: its own, or 127.0.0.1 when it listens on every address.
func reachable(bound net.Addr) (string, bool) {
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return "", false
	}
	ip := tcp.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return Loopback(net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port)))
}

// record creates the replica's Lease, or updates it unless it already says
// the same.
func (a *Announcer) record(ctx context.Context, addr string) (*coordinationv1.Lease, error) {
	leases := a.o.Client.CoordinationV1().Leases(a.o.Namespace)
	name := LeaseName(a.o.Replica)
	now := metav1.NewMicroTime(time.Now())
	want := func(l *coordinationv1.Lease) {
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[NameLabel], l.Labels[ComponentLabel] = NameValue, ComponentValue
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AddressAnnotation] = addr
		l.Spec.HolderIdentity = &a.o.Replica
		l.Spec.AcquireTime = &now
	}
	same := func(l *coordinationv1.Lease) bool {
		return l.Labels[NameLabel] == NameValue && l.Labels[ComponentLabel] == ComponentValue &&
			l.Annotations[AddressAnnotation] == addr && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == a.o.Replica
	}
	for attempt := 0; ; attempt++ {
		existing, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.o.Namespace}}
			want(l)
			created, err := leases.Create(ctx, l, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) && attempt < 3 {
				continue
			}
			return created, err
		case err != nil:
			return nil, err
		case same(existing):
			return existing, nil
		}
		want(existing)
		updated, err := leases.Update(ctx, existing, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		return updated, err
	}
}
