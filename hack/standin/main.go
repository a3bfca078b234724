// Command standin runs a stand-in proxy (test/standin) for each Running pod
// of an Envoy fleet: a real ADS client, named as the pod and presenting the
// fleet's client certificate from its Secret, that asks the operator's xDS
// server for everything the fleet is served and accepts it. KWOK's pods run
// no Envoy; with these, `kubectl envoy proxy-status` and the EnvoyConfigs'
// ACKED column show a fleet at work. make run starts them for the gateway
// sample, and stops them with the operator.
//
//	go run ./hack/standin --namespace default --fleet web-gateway --xds-address 127.0.0.1:18000
//
// It runs until it is interrupted. A stream the server ends is opened again.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/hostcmd"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/standin"
)

func main() {
	var (
		namespace  = flag.String("namespace", "default", "the fleet's namespace")
		name       = flag.String("fleet", "", "the fleet: the name of its Envoy")
		addr       = flag.String("xds-address", "", "host:port of the operator's xDS server")
		serverName = flag.String("server-name", "localhost", "the name the xDS server's certificate is checked for")
		timeout    = flag.Duration("wait", 2*time.Minute, "how long to wait for the fleet's certificate and Running pods")
	)
	flag.Parse()
	if *name == "" || *addr == "" {
		fmt.Fprintln(os.Stderr, "usage: standin --fleet NAME --xds-address HOST:PORT [--namespace NS] [--kubeconfig FILE]")
		os.Exit(2)
	}
	hostcmd.Main("standin", func(ctx context.Context, cs kubernetes.Interface) error {
		return run(ctx, cs, *namespace, *name, *addr, *serverName, *timeout)
	})
}

func run(ctx context.Context, cs kubernetes.Interface, namespace, name, addr, serverName string, timeout time.Duration) error {
	e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	id := fleet.Of(e)

	// What the kubelet would mount and run: the fleet's Secret, and its pods.
	var secret *corev1.Secret
	var pods []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(namespace).Get(ctx, fleet.ClientSecretName(e), metav1.GetOptions{})
		if err != nil || len(s.Data[standin.CertFile]) == 0 {
			return false, nil
		}
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(fleet.SelectorLabels(e)).String(), FieldSelector: "status.phase=Running",
		})
		if err != nil {
			return false, nil
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				pods = append(pods, p.Name)
			}
		}
		secret = s
		return len(pods) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("fleet %s: no client certificate Secret %s or no Running pod: %w", id, fleet.ClientSecretName(e), err)
	}
	sort.Strings(pods)
	creds, err := standin.Credentials(secret.Data[standin.CertFile], secret.Data[standin.KeyFile], secret.Data[standin.CAFile], serverName)
	if err != nil {
		return err
	}
	fmt.Printf("standin: %d proxies of fleet %s at %s: %v\n", len(pods), id, addr, pods)

	var wg sync.WaitGroup
	for _, pod := range pods {
		// A connection of its own for each, as each Envoy holds one.
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		c := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
		node := &corev3.Node{Id: pod, Cluster: id.String()}
		wg.Add(1)
		go func() {
			defer wg.Done()
			proxy(ctx, c, node)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// proxy keeps node's ADS stream open until ctx ends, opening it again a
// second after the server ends it, and prints each version it accepts.
func proxy(ctx context.Context, c discoveryv3.AggregatedDiscoveryServiceClient, node *corev3.Node) {
	for ctx.Err() == nil {
		err := standin.SotW(ctx, c, node, standin.Everything(), func(typeURL, version string, _ int) {
			fmt.Printf("standin: %s accepted %s version %s\n", node.Id, typeURL, version)
		})
		if ctx.Err() != nil {
			return
		}
		fmt.Printf("standin: %s: the stream ended (%v); again in a second\n", node.Id, err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
