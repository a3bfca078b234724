package inject

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// The generated configuration sends the injector the pods of a namespace
// only when it carries the opt-in label, and never those of kube-system or
// of the operator's namespace: its namespaceSelector, judged as the API
// server judges it, against each namespace's labels.
func TestConfigurationSelectsOptedInNamespacesOnly(t *testing.T) {
	hooks, _, err := testenv.WebhookManifests()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range hooks {
		for _, h := range c.Webhooks {
			if h.ClientConfig.Service == nil || h.ClientConfig.Service.Path == nil || *h.ClientConfig.Service.Path != Path {
				continue
			}
			found = true
			if h.NamespaceSelector == nil {
				t.Fatalf("webhook %s has no namespaceSelector: it is sent every namespace's pods", h.Name)
			}
			selector, err := metav1.LabelSelectorAsSelector(h.NamespaceSelector)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				namespace string
				label     map[string]string
				want      bool
			}{
				{"shop", nil, false},
				{"shop", map[string]string{NamespaceLabel: "disabled"}, false},
				{"shop", map[string]string{NamespaceLabel: ""}, false},
				{"shop", map[string]string{"other": NamespaceEnabled}, false},
				{"shop", map[string]string{NamespaceLabel: NamespaceEnabled}, true},
				{"kube-system", map[string]string{NamespaceLabel: NamespaceEnabled}, false},
				{operatorNamespace, map[string]string{NamespaceLabel: NamespaceEnabled}, false},
			} {
				// The API server labels every namespace with its name.
				set := labels.Set{"kubernetes.io/metadata.name": tc.namespace}
				for k, v := range tc.label {
					set[k] = v
				}
				if got := selector.Matches(set); got != tc.want {
					t.Errorf("webhook %s, namespace labelled %v: sent %v, want %v", h.Name, set, got, tc.want)
				}
			}
		}
	}
	if !found {
		t.Fatalf("no webhook of config/webhook/manifests.yaml calls %s", Path)
	}
}
