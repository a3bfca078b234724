//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/xdstest"
	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// fleetSecret returns the files of the client certificate Secret that the
// operator issued to Envoy ns/name, as its proxies mount them.
func fleetSecret(t *testing.T, ns, name string) (cert, key, ca []byte) {
	t.Helper()
	get := func(k string) []byte {
		var out string
		framework.Eventually(t, time.Minute, "the fleet's client certificate Secret", func() (bool, error) {
			var err error
			out, err = kubectl.Out("-n", ns, "get", "secret", name+"-xds-client", "-o", "jsonpath={.data."+strings.ReplaceAll(k, ".", "\\.")+"}")
			return err == nil && out != "", nil
		})
		b, err := base64.StdEncoding.DecodeString(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return get("tls.crt"), get("tls.key"), get("ca.crt")
}

// dialAsFleet connects to the operator's xDS server as a proxy of Envoy
// ns/name: over mutual TLS, with the Secret the operator issued to the fleet.
func dialAsFleet(t *testing.T, ns, name string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	cert, key, ca := fleetSecret(t, ns, name)
	return xdstest.DialTLS(t, os.Getenv("E2E_XDS_ADDR"), "localhost", cert, key, ca)
}

// Only a fleet's own certificate reads the fleet: a client without one, or
// a plaintext one, gets nothing; fleet A's certificate, claiming fleet B, is
// refused with PermissionDenied; fleet B's own gets its configuration.
func TestXDSServesOnlyTheCertificatesFleet(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "e2e-mtls")
	kubectl.Apply(t, ns, `
apiVersion: example.com/v1
kind: Envoy
metadata: {name: a}
---
apiVersion: example.com/v1
kind: Envoy
metadata: {name: b}
---
apiVersion: example.com/v1
kind: EnvoyConfig
metadata: {name: b}
spec:
  envoyRef: b
  resources:
    clusters:
    - {name: b-only, type: STATIC, connect_timeout: 1s}
`)
	kubectl.WaitJSONPath(t, time.Minute, ns, "envoyconfig/b", `{.status.conditions[?(@.type=="Published")].status}`, "True")
	addr := os.Getenv("E2E_XDS_ADDR")
	_, _, ca := fleetSecret(t, ns, "a")

	ask := func(c discoveryv3.AggregatedDiscoveryServiceClient, fleet string) (*discoveryv3.DiscoveryResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := c.StreamAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "e2e", Cluster: fleet}, TypeUrl: resourcev3.ClusterType}); err != nil {
			return nil, err
		}
		return st.Recv()
	}
	for name, c := range map[string]discoveryv3.AggregatedDiscoveryServiceClient{
		"no certificate": xdstest.DialTLS(t, addr, "localhost", nil, nil, ca),
		"plaintext":      xdstest.Dial(t, addr),
	} {
		if resp, err := ask(c, ns+"/b"); err == nil || status.Code(err) == codes.DeadlineExceeded {
			t.Errorf("%s: got %v, %v; want a refused connection", name, resp, err)
		}
	}
	if resp, err := ask(dialAsFleet(t, ns, "a"), ns+"/b"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("fleet a's certificate claiming fleet b: got %v, %v; want PermissionDenied", resp, err)
	}
	resp, err := ask(dialAsFleet(t, ns, "b"), ns+"/b")
	if err != nil || len(resp.GetResources()) != 1 {
		t.Errorf("fleet b's own certificate: got %v, %v; want its cluster", resp, err)
	}
}
