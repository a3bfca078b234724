// Package podtemplate is the operator's validating admission webhook for
// the kinds whose content ends up in pods: Watchers, whose container and
// volume the injector adds to pods, PodSets, whose template is every pod
// they create, and Envoys, whose compute resources are every proxy's. It
// refuses, at kubectl apply, content that the API server would refuse only
// later, in every pod made from it. The CRD schemas hold what CEL's cost
// budget allows; a PodSet's template has lists and maps of any length, over
// which it allows little, and CEL has no remainder of quantities (whole
// pages, whole units), so the kinds are judged here by one set of checks:
//
//   - label and annotation keys and values that are not a label's or an
//     annotation's: a name part over 63 characters, a prefix that is not a
//     DNS subdomain (a PodSet's template metadata, a Watcher's selector);
//   - container ports whose name is not an IANA service name, or is used
//     twice in a container, or whose protocol is not TCP, UDP or SCTP;
//   - compute resources a container may not have: extended resources in
//     fractions, hugepages that are not a whole number of pages, either
//     without a limit equal to its request, hugepages without cpu or
//     memory, names that are no resource's, negative quantities, requests
//     above limits (a Watcher's and a PodSet's containers, an Envoy's
//     spec.resources);
//   - volumes a pod may not have: not exactly one source, file paths that
//     leave the volume, file modes over 0777, a hostPath type that is none,
//     and volume mounts without a path or with a sub path that leaves the
//     volume (a PodSet's mounts must name its template's volumes).
//
// The checks are apimachinery's validation functions where it has them,
// and otherwise the API server's own rules for pods, restated. Each message
// names the field. An update that leaves the checked content as it is (a
// PodSet's template, a Watcher's spec, an Envoy's resources) is admitted,
// so that an object stored before a check existed can still be labelled,
// scaled or deleted.
// The generated configuration sends no object of kube-system or of the
// operator's own namespace.
package podtemplate
