package manager

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	k8sv1 "github.com/kube-envoy-controller/kube-envoy-controller/api/k8s/v1"
	samplev1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/samplecontroller/v1alpha1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
)

// NewScheme returns the operator's scheme: the built-in kinds and every API
// group of this project, and the Gateway API's GA and beta versions.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(samplev1alpha1.AddToScheme(s))
	utilruntime.Must(examplev1.AddToScheme(s))
	utilruntime.Must(demov1alpha1.AddToScheme(s))
	utilruntime.Must(k8sv1.AddToScheme(s))
	utilruntime.Must(watchv1alpha1.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(gwv1beta1.Install(s))
	return s
}
