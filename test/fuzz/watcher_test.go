package fuzz

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/controller/watcher"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/objcheck"
)

// watcherSeeds are Watcher specs, valid and not, for the Watcher's and the
// injection's targets.
var watcherSeeds = []struct{ name, spec string }{
	{"logs", `{"container":{"name":"tail","image":"busybox"}}`},
	{long("w", 63), `{"container":{"name":"tail","image":"busybox","ports":[{"containerPort":8080}],"resources":{"requests":{"cpu":"100m"}},` +
		`"volumeMounts":[{"name":"logs","mountPath":"/logs"}]},"volume":{"name":"logs","emptyDir":{}},"imagePullSecrets":{"name":"registry"},` +
		`"configData":{"LEVEL":"debug",".hidden":"x"},"configBinaryData":{"blob":"eA=="},"selector":{"matchLabels":{"app":"web"}}}`},
	{"all", `{"container":{"name":"tail","image":"busybox"},"selector":{}}`},
	{"ops", `{"container":{"name":"tail","image":"busybox"},"selector":{"matchExpressions":[{"key":"tier","operator":"In","values":["a"]},{"key":"x","operator":"DoesNotExist"}]}}`},
	{"bad", `{"container":{"name":"Bad_Name","image":"busybox"},"selector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]}}`},
	{"dots", `{"container":{"name":"tail","image":"busybox"},"configData":{"..":"x"}}`},
}

func FuzzWatcherConfigMap(f *testing.F) {
	for _, seed := range watcherSeeds {
		f.Add(seed.name, []byte(seed.spec))
	}
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		w := &watchv1alpha1.Watcher{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fuzz", UID: "7c1a", Generation: 1}}
		if !decode(spec, &w.Spec) || !admitted(t, "Watcher", w) {
			t.Skip("the API server refuses it")
		}
		cm := watcher.ConfigMap(w)
		valid(t, "the ConfigMap", objcheck.ConfigMap(cm), cm)
		if st := watcher.Status(w, watcher.Observed{}); st.ConfigMapName != cm.Name {
			t.Fatalf("status.configMapName %q, but the ConfigMap is %q", st.ConfigMapName, cm.Name)
		}
	})
}
