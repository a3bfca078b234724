package publish_test

import (
	"testing"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/publish"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/stats"
)

// The scopes are named as the stats receiver names them.
func TestScopeNames(t *testing.T) {
	if publish.ScopeHTTP("ingress") != stats.ScopeHTTP("ingress") || publish.ScopeCluster("web") != stats.ScopeCluster("web") {
		t.Errorf("scopes %s and %s, the receiver's %s and %s", publish.ScopeHTTP("ingress"), publish.ScopeCluster("web"), stats.ScopeHTTP("ingress"), stats.ScopeCluster("web"))
	}
}
