// Package objcheck checks that objects the operator renders are ones the API
// server would store: their names, labels, annotations and owner references,
// and the parts of pods, Deployments, Services, ConfigMaps and Jobs that the
// operator fills in. It applies apimachinery's validation functions, the ones
// the API server's own validation of these kinds calls; it is a subset of that
// validation (k8s.io/kubernetes cannot be imported), written for the fuzz tests.
package objcheck

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Meta checks an object's metadata: name (by nameFn, or generateName),
// namespace, labels, annotations, owner references and finalizers.
func Meta(meta *metav1.ObjectMeta, nameFn apimachineryvalidation.ValidateNameFunc, path *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMeta(meta, true, nameFn, path)
}

// Labels and annotations of a template, which has no name.
func templateMeta(meta *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(meta.Labels, path.Child("labels"))
	return append(errs, apimachineryvalidation.ValidateAnnotations(meta.Annotations, path.Child("annotations"))...)
}

func messages(path *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, m := range msgs {
		errs = append(errs, field.Invalid(path, value, m))
	}
	return errs
}

// Container checks a container's name, image, ports, resources and the
// volumes it mounts (volumes are the pod's volume names).
func Container(c *corev1.Container, volumes sets.Set[string], path *field.Path) field.ErrorList {
	errs := messages(path.Child("name"), c.Name, validation.IsDNS1123Label(c.Name))
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(path.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	portNames := sets.New[string]()
	for i, p := range c.Ports {
		pp := path.Child("ports").Index(i)
		errs = append(errs, messages(pp.Child("containerPort"), p.ContainerPort, validation.IsValidPortNum(int(p.ContainerPort)))...)
		if p.Name != "" {
			errs = append(errs, messages(pp.Child("name"), p.Name, validation.IsValidPortName(p.Name))...)
			if portNames.Has(p.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			portNames.Insert(p.Name)
		}
	}
	for i, e := range c.Env {
		errs = append(errs, messages(path.Child("env").Index(i).Child("name"), e.Name, validation.IsRelaxedEnvVarName(e.Name))...)
	}
	for i, m := range c.VolumeMounts {
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(path.Child("volumeMounts").Index(i).Child("name"), m.Name))
		}
	}
	return append(errs, Resources(&c.Resources, path.Child("resources"))...)
}

// Resources checks resource names and quantities: standard or
// domain-prefixed names, no negative quantity, requests within limits.
func Resources(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for name, q := range list.rl {
			p := path.Child(list.name).Key(string(name))
			if !standardResource(string(name)) {
				errs = append(errs, field.Invalid(p, name, "must be a standard resource name or a domain-prefixed extended resource"))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p, q.String(), "must not be negative"))
			}
		}
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(), fmt.Sprintf("must be less than or equal to the limit %s", lim.String())))
		}
	}
	if len(r.Claims) > 0 {
		errs = append(errs, field.Forbidden(path.Child("claims"), "the pod declares no resource claims"))
	}
	return errs
}

func standardResource(name string) bool {
	switch {
	case name == "cpu" || name == "memory" || name == "ephemeral-storage" || strings.HasPrefix(name, "hugepages-"):
		return true
	case strings.Contains(name, "/"):
		return len(validation.IsQualifiedName(name)) == 0
	}
	return false
}

// PodSpec checks a pod's containers (at least one, unique names), volumes
// (DNS labels, unique), restart policy and image pull secrets.
func PodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, v := range spec.Volumes {
		p := path.Child("volumes").Index(i).Child("name")
		errs = append(errs, messages(p, v.Name, validation.IsDNS1123Label(v.Name))...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(p, v.Name))
		}
		volumes.Insert(v.Name)
	}
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), ""))
	}
	names := sets.New[string]()
	for _, list := range []struct {
		name       string
		containers []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.containers {
			c := &list.containers[i]
			p := path.Child(list.name).Index(i)
			errs = append(errs, Container(c, volumes, p)...)
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
	}
	switch spec.RestartPolicy {
	case "", corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	for i, s := range spec.ImagePullSecrets {
		errs = append(errs, messages(path.Child("imagePullSecrets").Index(i).Child("name"), s.Name, validation.IsDNS1123Subdomain(s.Name))...)
	}
	return errs
}

// Pod checks a pod as created (with a name or a generateName).
func Pod(pod *corev1.Pod) field.ErrorList {
	meta := pod.ObjectMeta
	if meta.Name == "" && meta.GenerateName != "" {
		// The API server names the pod before it validates it, as
		// k8s.io/apiserver's names.SimpleNameGenerator does: the prefix cut
		// to 58 characters, then 5 random ones.
		meta.Name = meta.GenerateName[:min(len(meta.GenerateName), 58)] + "x2v9q"
	}
	errs := Meta(&meta, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, PodSpec(&pod.Spec, field.NewPath("spec"))...)
}

// selects checks that selector is valid, not empty, and selects the template's labels.
func selects(selector *metav1.LabelSelector, template map[string]string, path *field.Path) field.ErrorList {
	if selector == nil || len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
		return field.ErrorList{field.Required(path, "an empty selector would select every pod")}
	}
	errs := metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, path)
	if len(errs) > 0 {
		return errs
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return field.ErrorList{field.Invalid(path, selector, err.Error())}
	}
	if !sel.Matches(labels.Set(template)) {
		errs = append(errs, field.Invalid(path, selector, "does not match the template's labels"))
	}
	return errs
}

// Deployment checks a Deployment: its metadata, a selector that selects its
// template, the template, and replicas.
func Deployment(d *appsv1.Deployment) field.ErrorList {
	errs := Meta(&d.ObjectMeta, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	if d.Spec.Replicas != nil && *d.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *d.Spec.Replicas, "must be greater than or equal to 0"))
	}
	errs = append(errs, selects(d.Spec.Selector, d.Spec.Template.Labels, spec.Child("selector"))...)
	errs = append(errs, templateMeta(&d.Spec.Template.ObjectMeta, spec.Child("template", "metadata"))...)
	if p := d.Spec.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(spec.Child("template", "spec", "restartPolicy"), p, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	return append(errs, PodSpec(&d.Spec.Template.Spec, spec.Child("template", "spec"))...)
}

// Service checks a Service: a DNS-1035 name, its type, ports (valid numbers,
// unique; named when there are several) and selector labels.
func Service(s *corev1.Service) field.ErrorList {
	errs := Meta(&s.ObjectMeta, apimachineryvalidation.NameIsDNS1035Label, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	switch s.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), s.Spec.Type, []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}))
	}
	if len(s.Spec.Ports) == 0 {
		errs = append(errs, field.Required(spec.Child("ports"), ""))
	}
	names, numbers := sets.New[string](), sets.New[string]()
	for i, p := range s.Spec.Ports {
		pp := spec.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 || p.Name != "" {
			errs = append(errs, messages(pp.Child("name"), p.Name, validation.IsDNS1035Label(p.Name))...)
		}
		if names.Has(p.Name) {
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		names.Insert(p.Name)
		errs = append(errs, messages(pp.Child("port"), p.Port, validation.IsValidPortNum(int(p.Port)))...)
		key := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if numbers.Has(key) {
			errs = append(errs, field.Duplicate(pp, key))
		}
		numbers.Insert(key)
		if p.TargetPort.IntVal != 0 || p.TargetPort.StrVal == "" {
			errs = append(errs, messages(pp.Child("targetPort"), p.TargetPort.IntVal, validation.IsValidPortNum(int(p.TargetPort.IntVal)))...)
		} else {
			errs = append(errs, messages(pp.Child("targetPort"), p.TargetPort.StrVal, validation.IsValidPortName(p.TargetPort.StrVal))...)
		}
	}
	return append(errs, metav1validation.ValidateLabels(s.Spec.Selector, spec.Child("selector"))...)
}

// ConfigMap checks a ConfigMap: its keys, that data and binaryData share
// none, and its size (1 MiB).
func ConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := Meta(&cm.ObjectMeta, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	size := 0
	for k, v := range cm.Data {
		errs = append(errs, messages(field.NewPath("data").Key(k), k, validation.IsConfigMapKey(k))...)
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		errs = append(errs, messages(field.NewPath("binaryData").Key(k), k, validation.IsConfigMapKey(k))...)
		if _, ok := cm.Data[k]; ok {
			errs = append(errs, field.Duplicate(field.NewPath("binaryData").Key(k), k))
		}
		size += len(k) + len(v)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

// Job checks a Job: its name, which its pods carry as a label value (at most
// 63 characters), and its pod template, which must not restart Always.
func Job(j *batchv1.Job) field.ErrorList {
	errs := Meta(&j.ObjectMeta, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, messages(field.NewPath("metadata", "name"), j.Name, validation.IsValidLabelValue(j.Name))...)
	spec := field.NewPath("spec")
	if j.Spec.BackoffLimit != nil && *j.Spec.BackoffLimit < 0 {
		errs = append(errs, field.Invalid(spec.Child("backoffLimit"), *j.Spec.BackoffLimit, "must be greater than or equal to 0"))
	}
	if p := j.Spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyNever && p != corev1.RestartPolicyOnFailure {
		errs = append(errs, field.NotSupported(spec.Child("template", "spec", "restartPolicy"), p, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	errs = append(errs, templateMeta(&j.Spec.Template.ObjectMeta, spec.Child("template", "metadata"))...)
	return append(errs, PodSpec(&j.Spec.Template.Spec, spec.Child("template", "spec"))...)
}
