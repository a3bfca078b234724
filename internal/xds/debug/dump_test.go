package debug

import (
	"encoding/json"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/translate"
)

// A dump is in Envoy's field names, by kind, and never shows a private key
// (served secrets hold the keys of Kubernetes Secrets inline).
func TestDump(t *testing.T) {
	secret := &tlsv3.Secret{Name: "server-cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("PUBLIC-CHAIN")}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("PRIVATE-KEY")}},
	}}}
	cluster := &clusterv3.Cluster{Name: "backend", ConnectTimeout: durationpb.New(1e9)}
	resources := map[string][]types.Resource{resourcev3.SecretType: {secret}, resourcev3.ClusterType: {cluster}}

	all, err := Dump("ns/edge", "r", resources, "")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(all)
	got := string(js)
	for _, want := range []string{`"connect_timeout":"1s"`, `"listeners":[]`, `"inline_string":"` + translate.Redacted + `"`,
		`"certificate_chain":{"inline_bytes":"UFVCTElDLUNIQUlO"}`} {
		if !strings.Contains(got, want) {
			t.Errorf("the dump has no %s: %s", want, got)
		}
	}
	if strings.Contains(got, "UFJJVkFURS1LRVk") || strings.Contains(got, "PRIVATE-KEY") {
		t.Errorf("the dump shows the private key: %s", got)
	}
	if secret.GetTlsCertificate().GetPrivateKey().GetInlineBytes() == nil {
		t.Error("the served secret was changed")
	}

	only, err := Dump("ns/edge", "r", resources, "clusters")
	if err != nil {
		t.Fatal(err)
	}
	if len(only.Resources) != 1 || len(only.Resources["clusters"]) != 1 {
		t.Errorf("--type clusters dumps %v", only.Resources)
	}
}
