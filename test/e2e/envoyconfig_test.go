//go:build e2e

package e2e

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
)

const edsConfig = `
apiVersion: example.com/v1
kind: Envoy
metadata:
  name: edge
spec:
  replicas: 1
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: example.com/v1
kind: EnvoyConfig
metadata:
  name: web
spec:
  envoyRef: edge
  resources:
    clusters:
    - name: web
      type: EDS
      connect_timeout: 1s
      eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
  serviceEndpoints:
  - {cluster: web, service: web, port: http}
`

// A Service's KWOK pods appear as the EDS cluster's endpoints on the
// operator's xDS server, and follow the Deployment as it scales up and down.
func TestServiceEndpointsOverXDS(t *testing.T) {
	ns := namespace(t, "e2e-eds")
	f, err := os.CreateTemp(t.TempDir(), "eds-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(edsConfig); err != nil {
		t.Fatal(err)
	}
	f.Close()
	kubectl(t, "-n", ns, "apply", "-f", f.Name())
	waitJSONPath(t, time.Minute, ns, "envoyconfig/web", `{.status.conditions[?(@.type=="Accepted")].status}`, "True")

	proxy := xdstest.Connect(t, xdstest.Dial(t, os.Getenv("E2E_XDS_ADDR")), ns+"/edge", "e2e-proxy", resourcev3.EndpointType, "web")
	// podIPs returns the addresses of the Running pods that are not being
	// deleted, asking again if kubectl fails.
	podIPs := func() string {
		var out string
		eventually(t, time.Minute, "the Running pods' addresses", func() (bool, error) {
			var err error
			out, err = kubectlOut("-n", ns, "get", "pods", "-l", "app=web", "--field-selector=status.phase=Running",
				"-o", `jsonpath={range .items[*]}{.status.podIP} {.metadata.deletionTimestamp}{"\n"}{end}`)
			return err == nil, err
		})
		var ips []string
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 1 {
				ips = append(ips, f[0]+":8080")
			}
		}
		sort.Strings(ips)
		return strings.Join(ips, ",")
	}
	// waitEndpoints reads EDS responses until they hold n endpoints, which must
	// be exactly the Running pods' addresses.
	waitEndpoints := func(n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			resp, err := proxy.Next("")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range resp.GetResources() {
				cla := &endpointv3.ClusterLoadAssignment{}
				if err := a.UnmarshalTo(cla); err != nil {
					t.Fatal(err)
				}
				for _, loc := range cla.GetEndpoints() {
					for _, e := range loc.GetLbEndpoints() {
						sa := e.GetEndpoint().GetAddress().GetSocketAddress()
						got = append(got, sa.GetAddress()+":"+strconv.Itoa(int(sa.GetPortValue())))
					}
				}
			}
			sort.Strings(got)
			t.Logf("EDS version %s: %d endpoints", resp.GetVersionInfo(), len(got))
			if len(got) == n {
				if want := podIPs(); strings.Join(got, ",") != want {
					t.Fatalf("endpoints %v, want the Running pods %s", got, want)
				}
				return
			}
		}
		t.Fatalf("no EDS response with %d endpoints within 2 minutes", n)
	}
	waitEndpoints(3)
	kubectl(t, "-n", ns, "scale", "deployment/web", "--replicas=5")
	waitEndpoints(5)
	kubectl(t, "-n", ns, "scale", "deployment/web", "--replicas=2")
	waitEndpoints(2)
}
