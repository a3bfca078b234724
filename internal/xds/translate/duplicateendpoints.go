package translate

import (
	"fmt"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/resource"
)

// duplicateLoadAssignments refuses a serviceEndpoints entry whose cluster's
// load assignment c's spec.resources.endpoints already defines: the EDS
// cluster would have two, as two clusters of one name would be two
// definitions of one cluster (resource.Parse refuses those). Each error
// names both places.
func duplicateLoadAssignments(c Config, inline []resource.Resource) []error {
	defined := map[string]string{}
	for _, r := range inline {
		if r.Kind.TypeURL == resourcev3.EndpointType {
			defined[r.Name] = r.Path
		}
	}
	var errs []error
	for i, se := range c.Spec.ServiceEndpoints {
		if path, dup := defined[se.Cluster]; dup {
			errs = append(errs, fmt.Errorf("spec.serviceEndpoints[%d] (%q): the cluster load assignment of cluster %q is already defined at %s: define it in one place",
				i, se.Cluster, se.Cluster, path))
		}
	}
	return errs
}
