package fuzz

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/envoy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/fleet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/objcheck"
)

var builtinXDS = fleet.Defaults{XDS: proxy.XDSServer{
	ClusterName: fleet.XDSClusterName, Host: "kube-envoy-controller-xds.kube-envoy-controller.svc", Port: 18000,
}}

func FuzzEnvoyDesired(f *testing.F) {
	for _, seed := range []struct{ name, spec string }{
		{"edge", `{}`},
		{"edge", `{"ports":[{"name":"http","port":8080}]}`},
		{"edge", `{"ports":[{"name":"a","port":80,"targetPort":8080},{"name":"b","port":8080}]}`},
		{"edge.proxy", `{"name":"edge-proxy","configMapName":"boot.strap","replicas":0,"image":"registry.example.com/envoy@sha256:0123",` +
			`"xds":{"name":"xds:main","host":"10.0.0.1","port":18000},"podLabels":{"example.com/team":"a","tier":""},` +
			`"podAnnotations":{"Note/Key":"free text"},"resources":{"requests":{"cpu":"100m","memory":"1Gi"},"limits":{"cpu":1,"example.com/dev":"1"}},` +
			`"ports":[{"name":"low","port":80},{"name":"high","port":65535,"targetPort":1}],"serviceType":"LoadBalancer","logLevel":"off"}`},
		{"e", `{"xds":{"host":"xds.example.com","port":65535},"podLabels":{"app.kubernetes.io/instance":"x"}}`},
		{"edge", `{"ports":[{"name":"admin","port":19000}]}`},
		{"Edge", `{"podLabels":{"a b":"c"}}`},
	} {
		f.Add(seed.name, []byte(seed.spec))
	}
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		e := &examplev1.Envoy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fuzz", UID: "7c1a", Generation: 1}}
		if !decode(spec, &e.Spec) || !admitted(t, "Envoy", e) {
			t.Skip("the API server refuses it")
		}
		children, err := envoy.Desired(e, builtinXDS)
		if err != nil {
			t.Fatalf("an admitted Envoy does not render: %v", err)
		}
		valid(t, "the bootstrap ConfigMap", objcheck.ConfigMap(children.ConfigMap), children.ConfigMap)
		valid(t, "the Deployment", objcheck.Deployment(children.Deployment), children.Deployment)
		valid(t, "the Service", objcheck.Service(children.Service), children.Service)
		if _, err := proxy.ParseBootstrap([]byte(children.ConfigMap.Data[proxy.BootstrapKey])); err != nil {
			t.Fatalf("the bootstrap does not pass Envoy's schema: %v", err)
		}

		// The Service sends to the Deployment's pods, on ports the proxy declares.
		pod := children.Deployment.Spec.Template
		if !labels.SelectorFromSet(children.Service.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			t.Fatalf("the Service's selector %v does not select the pods %v", children.Service.Spec.Selector, pod.Labels)
		}
		declared := sets.New[int32]()
		for _, p := range pod.Spec.Containers[0].Ports {
			if declared.Has(p.ContainerPort) {
				t.Fatalf("the proxy declares port %d twice", p.ContainerPort)
			}
			declared.Insert(p.ContainerPort)
		}
		for _, p := range children.Service.Spec.Ports {
			if !declared.Has(p.TargetPort.IntVal) {
				t.Fatalf("the Service targets port %d, which the proxy does not declare", p.TargetPort.IntVal)
			}
		}
		if e.Spec.ConfigMapName == "" && children.ConfigMap.Name == children.Deployment.Name {
			t.Fatalf("the ConfigMap and the Deployment share the name %q", children.ConfigMap.Name)
		}

		st := envoy.Status(e, envoy.Observed{Desired: children, Deployment: children.Deployment})
		if _, err := labels.Parse(st.Selector); err != nil {
			t.Fatalf("status.selector %q does not parse: %v", st.Selector, err)
		}
	})
}
