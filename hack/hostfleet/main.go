// Command hostfleet runs a namespace's proxies and backends on this host,
// for the playground (make run). KWOK's pods run nothing, so:
//
//   - every Running pod with an Envoy container (a fleet's proxy, or an
//     injected sidecar) runs as a real Envoy process here, named as its pod,
//     presenting its fleet's client certificate and started from the
//     bootstrap the operator rendered into the fleet's ConfigMap
//     (internal/testing/realenvoy);
//
//   - with the pods' network up (hack/podnet.sh), every pod's address
//     answers HTTP on --backend-ports as that pod would
//     (internal/testing/podnet), so the Envoys reach the pods behind a
//     Service through its EndpointSlices.
//
//     go run ./hack/hostfleet --namespace default --xds-address 127.0.0.1:18000 --envoy bin/envoy --dir tmp/proxies
//
// Each Envoy's admin interface is on a free port of 127.0.0.1, written to
// DIR/POD.admin. It runs until interrupted, then stops every Envoy.
//
// For the Gateway API, whose Gateways each listen on their own address and
// often on the same port, three options, each root only but the second:
//
//   - --pod-network runs each Envoy in a network namespace of its pod's own
//     (internal/testing/podnet): it binds its ports as in its pod, its admin
//     interface is at the pod's address (DIR/POD.admin), and it reaches the
//     xDS server, given on the host, at 169.254.1.1: the operator's xDS
//     server must then listen on every address (--xds-bind-address :PORT),
//     not on 127.0.0.1 alone;
//
//   - --load-balancers gives every Service of type LoadBalancer, in every
//     namespace, an address of 127.(N+1).0.0/16 (the load balancers' range of
//     the pods' network PODNET=N, hack/podnet.sh) in its status and forwards its
//     TCP ports to its ready endpoints (internal/testing/loadbalancer);
//
//   - --echo-basic PATH runs the Gateway API's echo backend (make tools
//     puts it in bin/echo-basic) for every Running pod of its image, in
//     every namespace, in the pod's own network namespace
//     (internal/testing/echopods), its files and output under DIR/echo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/echopods"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/hostcmd"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/loadbalancer"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
)

func main() {
	var (
		namespace = flag.String("namespace", "default", "the pods' namespace")
		selector  = flag.String("selector", "", "a label selector of the pods whose Envoys run here; empty, every pod with an Envoy container")
		addr      = flag.String("xds-address", "", "host:port of the operator's xDS server")
		envoy     = flag.String("envoy", "", "the Envoy binary")
		dir       = flag.String("dir", "", "where each proxy's files and log go")
		ports     = flag.String("backend-ports", "8080", "comma-separated ports on which the pods' addresses answer, with the pods' network up; empty, none")
		delta     = flag.Bool("delta", false, "the Envoys subscribe with the incremental xDS protocol (DELTA_GRPC) instead of the bootstrap's state of the world")
		podNet    = flag.Bool("pod-network", false, "run each Envoy in a network namespace of its pod's own (root); the xDS server must listen on every address")
		lbs       = flag.Bool("load-balancers", false, "give every Service of type LoadBalancer an address of the pods' network's range (127.(N+1).0.0/16, PODNET=N) and forward its TCP ports to its endpoints")
		echo      = flag.String("echo-basic", "", "the Gateway API's echo backend, run for every Running pod of its image in the pod's own network namespace (root); empty, none")
	)
	flag.Parse()
	if *addr == "" || *envoy == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: hostfleet --xds-address HOST:PORT --envoy PATH --dir DIR [--namespace NS] [--selector SEL] [--backend-ports 8080] [--pod-network] [--load-balancers] [--echo-basic PATH]")
		os.Exit(2)
	}
	if (*podNet || *echo != "") && podnet.Root() != nil {
		fmt.Fprintln(os.Stderr, "hostfleet: --pod-network and --echo-basic:", podnet.Root())
		os.Exit(2)
	}
	hostcmd.Main("hostfleet", func(ctx context.Context, cs kubernetes.Interface) error {
		return run(ctx, cs, *namespace, *selector, *addr, *envoy, *dir, *ports, *delta, *podNet, *lbs, *echo)
	})
}

func run(ctx context.Context, cs kubernetes.Interface, namespace, selector, addr, envoy, dir, ports string, delta, podNet, lbs bool, echo string) (err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	network, err := podnet.Current()
	if err != nil {
		return err
	}
	if ports != "" {
		if !podnet.Available(network.Namespace()) {
			fmt.Println("the pods' network is not up (hack/podnet.sh up, as root): the pods' addresses answer nothing")
		} else {
			var list []int
			for _, p := range strings.Split(ports, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(p))
				if err != nil {
					return fmt.Errorf("--backend-ports: %w", err)
				}
				list = append(list, n)
			}
			if err := podnet.Serve(ctx, network.Namespace(), &podnet.Pods{Client: cs, Namespace: namespace}, list...); err != nil {
				return err
			}
			fmt.Printf("the pods of %s answer on their addresses, ports %s\n", namespace, ports)
		}
	}
	if lbs {
		lbCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		c := &loadbalancer.Controller{Client: cs, Range: network.LoadBalancers(), Report: func(err error) { fmt.Println("hostfleet:", err) }}
		go func() { done <- c.Run(lbCtx) }()
		defer func() { cancel(); err = errors.Join(err, <-done) }()
		fmt.Println("every Service of type LoadBalancer gets an address of", c.Range)
	}
	if echo != "" {
		r := &echopods.Runner{Client: cs, Binary: echo, Dir: filepath.Join(dir, "echo")}
		if err := os.MkdirAll(r.Dir, 0o700); err != nil {
			return err
		}
		stopEcho := r.Start(func(err error) { fmt.Println("hostfleet:", err) })
		defer func() { err = errors.Join(err, stopEcho()) }()
		fmt.Println("the echo pods answer at their addresses, with", echo)
	}
	k := &realenvoy.Kubelet{Client: cs, Namespace: namespace, Selector: selector, Envoy: envoy, XDS: addr, Dir: dir, Delta: delta, PodNetwork: podNet}
	known := map[string]string{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer func() { k.StopAll(); err = errors.Join(err, k.NetworkErrors()) }()
	for {
		if err := k.Sync(ctx); err != nil && ctx.Err() == nil {
			fmt.Println("hostfleet:", err)
		}
		procs := k.Processes()
		for name, p := range procs {
			if known[name] != p.Admin {
				known[name] = p.Admin
				_ = os.WriteFile(filepath.Join(dir, name+".admin"), []byte(p.Admin+"\n"), 0o600)
				fmt.Printf("Envoy for pod %s (pid %d): admin %s, log %s\n", name, p.Pid(), p.Admin, filepath.Join(dir, name+".log"))
			}
		}
		for name := range known {
			if _, ok := procs[name]; !ok {
				delete(known, name)
				_ = os.Remove(filepath.Join(dir, name+".admin"))
				fmt.Printf("Envoy for pod %s stopped\n", name)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
