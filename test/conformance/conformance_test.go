//go:build conformance

// Package conformance runs the Gateway API's official conformance suite
// (sigs.k8s.io/gateway-api/conformance, the release go.mod pins) against the
// operator and real Envoys, on the local cluster hack/conformance.sh makes.
// KWOK's pods run nothing, so this test does the kubelet's and the cloud's
// part on this host, as root: each fleet's Envoy runs in a network
// namespace of its pod's own (realenvoy, podnet), each of the suite's echo
// backends runs the suite's own echo server in its pod's namespace
// (echopods), and each Service of type LoadBalancer gets a loopback address
// of its own that forwards to its ready endpoints (loadbalancer).
//
//	CONFORMANCE_XDS_ADDR  the operator's xDS server, host:port (it listens on every address)
//	CONFORMANCE_DIR       where the proxies' and backends' files and logs go
//	CONFORMANCE_REPORT    when set, the suite's report is written there
//	CONFORMANCE_RUN_TEST  when set, only the suite's test of that name runs
package conformance

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	gwconformance "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	conformanceconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/echopods"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/loadbalancer"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/realenvoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/gateway"
)

// className is the GatewayClass the suite's Gateways take.
const className = "kube-envoy-controller"

// skipped are the tests of the GATEWAY-HTTP profile, and of the features
// the class claims, that this rig or the operator cannot pass yet, and why.
var skipped = map[string]string{}

func TestConformance(t *testing.T) {
	if err := podnet.Root(); err != nil {
		t.Fatalf("the rig runs every pod in a network namespace of its own: %v", err)
	}
	xds, dir := os.Getenv("CONFORMANCE_XDS_ADDR"), os.Getenv("CONFORMANCE_DIR")
	if xds == "" || dir == "" {
		t.Fatal("CONFORMANCE_XDS_ADDR and CONFORMANCE_DIR must be set (hack/conformance.sh sets them)")
	}
	cfg, err := config.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtime.Scheme) error{v1alpha3.Install, v1alpha2.Install, v1beta1.Install, xv1alpha1.Install, gwv1.Install, apiextensionsv1.AddToScheme} {
		if err := install(c.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	rig(t, cs, xds, dir)

	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	if err := c.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	// The suite reads the features to test from the class's status.
	testenv.Eventually(t, "the GatewayClass to be accepted with its features", func() (bool, error) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(class), class); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(class.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)) &&
			len(class.Status.SupportedFeatures) > 0, nil
	})

	var skip []string
	for name := range skipped {
		skip = append(skip, name)
	}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     className,
			CleanupBaseResources: true,
			CleanupTestResources: true,
			// Two cores: one test at a time.
			DisableParallelTests: true,
			ConformanceProfiles:  []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName},
			SkipTests:            skip,
			TimeoutConfig:        conformanceconfig.DefaultTimeoutConfig(),
			ReportOutputPath:     os.Getenv("CONFORMANCE_REPORT"),
			RunTest:              os.Getenv("CONFORMANCE_RUN_TEST"),
			Implementation: confv1.Implementation{
				Organization: "kube-envoy-controller",
				Project:      "kube-envoy-controller",
				URL:          "https://github.com/kube-envoy-controller/kube-envoy-controller",
				Version:      "main",
				Contact:      []string{"https://github.com/kube-envoy-controller/kube-envoy-controller/issues"},
			},
		},
		Client:     c,
		Clientset:  cs,
		RestConfig: cfg,
		ManifestFS: []fs.FS{&gwconformance.Manifests},
	}
	gwconformance.RunConformanceWithOptions(t, opts)
}

// rig starts, until the test ends, what a cluster's nodes and cloud would
// do: the load balancers, the fleets' Envoys and the echo backends.
func rig(t *testing.T, cs kubernetes.Interface, xds, dir string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	report := func(what string) func(error) {
		return func(err error) {
			if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "context canceled") {
				t.Logf("%s: %v", what, err)
			}
		}
	}
	podNet, err := podnet.Current()
	if err != nil {
		t.Fatal(err)
	}
	lb := &loadbalancer.Controller{Client: cs, Range: podNet.LoadBalancers(), Report: report("load balancer")}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := lb.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("load balancer: %v", err)
		}
	}()
	envoyBin, err := realenvoy.Binary()
	if err != nil {
		t.Fatal(err)
	}
	echo, err := echopods.Binary()
	if err != nil {
		t.Fatal(err)
	}
	proxies := filepath.Join(dir, "proxies")
	if err := os.MkdirAll(proxies, 0o700); err != nil {
		t.Fatal(err)
	}
	k := &realenvoy.Kubelet{Client: cs, Namespace: infraNamespace, Envoy: envoyBin, XDS: xds, Dir: proxies, PodNetwork: true}
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.Run(ctx, 500*time.Millisecond, report("Envoys"))
	}()
	runner := &echopods.Runner{Client: cs, Binary: echo, Dir: filepath.Join(dir, "echo")}
	stopEcho := runner.Start(report("echo backends"))
	t.Cleanup(func() {
		cancel()
		if err := stopEcho(); err != nil {
			t.Errorf("stopping the echo backends: %v", err)
		}
		wg.Wait()
		if err := k.NetworkErrors(); err != nil {
			t.Errorf("removing the Envoys' network namespaces: %v", err)
		}
	})
}

// infraNamespace holds the suite's Gateways, and so their fleets.
const infraNamespace = "gateway-conformance-infra"
