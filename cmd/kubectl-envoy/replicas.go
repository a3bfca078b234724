package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/announce"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/names"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
)

// The operator's pods, as config/manager deploys them.
const (
	defaultOperatorNamespace = "kube-envoy-controller"
	operatorSelector         = "app.kubernetes.io/name=kube-envoy-controller"
	// debugPortName is the container port of the debug endpoint; without
	// it, the port is debug.DefaultPort.
	debugPortName = "debug"
	// serverName is a name the debug endpoint's certificate is issued for.
	serverName = "localhost"
)

// replica is one replica's debug endpoint, reached at a local address.
type replica struct {
	// name is the pod's name, the replica's name its Lease records, or the
	// address given.
	name string
	// pod and port are where to forward to; empty for an address.
	pod  string
	port int32
	// addr is the address given or recorded; empty for a pod.
	addr string
}

// replicasOf returns the pods to ask: running, not being deleted, by name.
func replicasOf(pods []corev1.Pod) []replica {
	var out []replica
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		out = append(out, replica{name: p.Name, pod: p.Name, port: debugPort(p)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// debugPort is the pod's container port named debug, or the default.
func debugPort(p corev1.Pod) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == debugPortName {
				return port.ContainerPort
			}
		}
	}
	return debug.DefaultPort
}

// endpoint reaches the replicas: through the API server's port forwarding
// to the operator's pods, or at the addresses given.
type endpoint struct {
	config    *rest.Config
	clientset kubernetes.Interface
	namespace string
	addresses []string
	stderr    io.Writer
}

// connection is one replica's debug endpoint, ready for requests.
type connection struct {
	replica string
	client  *http.Client
	base    string
	close   func()
}

// connect reaches every replica, and returns a connection for each that is
// reachable and a warning for each that is not. It fails when there is no
// replica, or none is reachable.
func (e *endpoint) connect(ctx context.Context) ([]connection, error) {
	roots, err := e.trustedCAs(ctx)
	if err != nil {
		return nil, err
	}
	var targets []replica
	if len(e.addresses) > 0 {
		for _, a := range e.addresses {
			targets = append(targets, replica{name: a, addr: a})
		}
	} else {
		pods, err := e.clientset.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: operatorSelector})
		if err != nil {
			return nil, fmt.Errorf("listing the operator's pods in %s: %w", e.namespace, err)
		}
		targets = replicasOf(pods.Items)
		if len(pods.Items) == 0 {
			// No pod at all: the operator may run on this host.
			if targets, err = e.recorded(ctx); err != nil {
				return nil, err
			}
			if len(targets) == 0 {
				return nil, fmt.Errorf("no pod of the operator (%s) in namespace %s (--operator-namespace), and no operator run on this host "+
					"records its debug endpoint there (Leases %s); give its address with --operator-address", operatorSelector, e.namespace, announce.Selector)
			}
		}
		if len(targets) == 0 {
			return nil, fmt.Errorf("no running pod of the operator (%s) in namespace %s (--operator-namespace)", operatorSelector, e.namespace)
		}
	}
	var (
		out  []connection
		errs []error
	)
	for _, r := range targets {
		c, err := e.dial(ctx, r, roots)
		if err != nil {
			fmt.Fprintf(e.stderr, "warning: replica %s: %v\n", r.name, err)
			errs = append(errs, fmt.Errorf("replica %s: %w", r.name, err))
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// recorded are the replicas of an operator run on a host, whose loopback
// addresses their Leases record (package announce). They are asked only
// when the operator has no pod, and, as any replica, only over TLS
// verified with the published CA certificates.
func (e *endpoint) recorded(ctx context.Context) ([]replica, error) {
	leases, err := e.clientset.CoordinationV1().Leases(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: announce.Selector})
	if err != nil {
		return nil, fmt.Errorf("no pod of the operator (%s) in namespace %s (--operator-namespace), and the Leases where an operator run on a host "+
			"records its debug endpoint cannot be read: %w", operatorSelector, e.namespace, err)
	}
	var out []replica
	for _, ep := range announce.Endpoints(leases.Items) {
		out = append(out, replica{name: ep.Replica, addr: ep.Address})
	}
	return out, nil
}

// trustedCAs are the xDS CA certificates the operator publishes: the debug
// endpoint's certificate must chain to one of them.
func (e *endpoint) trustedCAs(ctx context.Context) ([]byte, error) {
	cm, err := e.clientset.CoreV1().ConfigMaps(e.namespace).Get(ctx, names.CAConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the operator's CA certificates (ConfigMap %s/%s): %w", e.namespace, names.CAConfigMap, err)
	}
	ca := []byte(cm.Data[names.CABundleKey])
	if !x509.NewCertPool().AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("ConfigMap %s/%s holds no CA certificate under %s", e.namespace, names.CAConfigMap, names.CABundleKey)
	}
	return ca, nil
}

// dial forwards a local port to r's pod (unless r has an address), and
// returns a client that presents the kubeconfig's credentials (token,
// client certificate or exec plugin) and trusts only ca, for serverName.
func (e *endpoint) dial(ctx context.Context, r replica, ca []byte) (connection, error) {
	addr, closeFn := r.addr, func() {}
	if r.pod != "" {
		local, stop, err := e.forward(ctx, r)
		if err != nil {
			return connection{}, err
		}
		addr, closeFn = local, stop
	}
	cfg := rest.CopyConfig(e.config)
	cfg.Host = "https://" + addr
	cfg.APIPath = ""
	cfg.TLSClientConfig.Insecure = false
	cfg.TLSClientConfig.CAFile = ""
	cfg.TLSClientConfig.CAData = ca
	cfg.TLSClientConfig.ServerName = serverName
	cfg.Timeout = 30 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		closeFn()
		return connection{}, err
	}
	return connection{replica: r.name, client: client, base: cfg.Host, close: closeFn}, nil
}

// forward forwards a free local port to r's debug port through the API server.
func (e *endpoint) forward(ctx context.Context, r replica) (string, func(), error) {
	u := e.clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.namespace).Name(r.pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(e.config)
	if err != nil {
		return "", nil, err
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	// As kubectl does: WebSockets first, SPDY when the API server cannot
	// upgrade to them.
	if ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, e.config); err == nil {
		dialer = portforward.NewFallbackDialerForStreaming(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(r.port))}, stop, ready, io.Discard, e.stderr)
	if err != nil {
		return "", nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return "", nil, fmt.Errorf("forwarding to pod %s: %w", r.pod, err)
	case <-ctx.Done():
		close(stop)
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stop)
		return "", nil, fmt.Errorf("forwarding to pod %s: no local port: %v", r.pod, err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), func() { close(stop) }, nil
}

// statusError is a replica's refusal or failure.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string {
	switch e.code {
	case http.StatusUnauthorized:
		return "the operator could not authenticate you: " + e.msg
	case http.StatusForbidden:
		return "forbidden: " + e.msg
	}
	return fmt.Sprintf("%d %s: %s", e.code, http.StatusText(e.code), e.msg)
}

// get asks the connection's replica for path with query, and decodes its JSON answer into out.
func (c connection) get(ctx context.Context, path string, query url.Values, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &statusError{code: resp.StatusCode, msg: strings.TrimSpace(string(body))}
	}
	return json.Unmarshal(body, out)
}
