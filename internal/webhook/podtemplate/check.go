package podtemplate

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	demov1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/demo/v1alpha1"
	examplev1 "github.com/kube-envoy-controller/kube-envoy-controller/api/example/v1"
	watchv1alpha1 "github.com/kube-envoy-controller/kube-envoy-controller/api/watch/v1alpha1"
)

// Watcher returns what the API server would refuse, in every pod the
// Watcher is injected into, of what the Watcher adds: its container's
// ports, resources and volume mounts, and its volume; and its selector,
// whose keys and values must be those of labels.
func Watcher(w *watchv1alpha1.Watcher) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if w.Spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(w.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	errs = append(errs, container(&w.Spec.Container, nil, spec.Child("container"))...)
	if w.Spec.Volume.Name != "" {
		// A Watcher without a volume's name adds no volume.
		errs = append(errs, volume(&w.Spec.Volume, spec.Child("volume"))...)
	}
	return errs
}

// Envoy returns what the API server would refuse of every pod of the
// fleet, of what the Envoy sets in them: its proxy container's compute
// resources (spec.resources), the only quantities it takes. Its pod labels
// and annotations, ports and spread constraints are its CRD schema's to
// check.
func Envoy(e *examplev1.Envoy) field.ErrorList {
	return resources(&e.Spec.Resources, field.NewPath("spec", "resources"))
}

// PodSet returns what the API server would refuse of every pod the PodSet
// creates from its template: the template's label and annotation keys and
// values, its containers' ports, resources and volume mounts, and its
// volumes.
func PodSet(ps *demov1alpha1.PodSet) field.ErrorList {
	t := ps.Spec.Template
	if t == nil {
		return nil
	}
	tmpl := field.NewPath("spec", "template")
	meta := tmpl.Child("metadata")
	errs := metav1validation.ValidateLabels(t.Labels, meta.Child("labels"))
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(t.Annotations, meta.Child("annotations"))...)
	spec := tmpl.Child("spec")
	volumes := sets.New[string]()
	for i := range t.Spec.Volumes {
		v := &t.Spec.Volumes[i]
		p := spec.Child("volumes").Index(i)
		errs = append(errs, volume(v, p)...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
	}
	for _, list := range []struct {
		name       string
		containers []corev1.Container
	}{{"initContainers", t.Spec.InitContainers}, {"containers", t.Spec.Containers}} {
		for i := range list.containers {
			errs = append(errs, container(&list.containers[i], volumes, spec.Child(list.name).Index(i))...)
		}
	}
	return errs
}

// container checks c's ports, resources and volume mounts. volumes are the
// pod's volumes' names, nil when they are not known (a Watcher's container
// may mount a volume of the pod it is injected into).
func container(c *corev1.Container, volumes sets.Set[string], p *field.Path) field.ErrorList {
	errs := ports(c.Ports, p.Child("ports"))
	errs = append(errs, resources(&c.Resources, p.Child("resources"))...)
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if volumes != nil && !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), "where the volume is mounted in the container"))
		}
		if m.SubPath != "" {
			errs = append(errs, descending(m.SubPath, mp.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			errs = append(errs, descending(m.SubPathExpr, mp.Child("subPathExpr"))...)
		}
	}
	return errs
}

var protocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

// ports checks a container's ports: names (IANA service names, unique in
// the container), numbers and protocols.
func ports(ports []corev1.ContainerPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		pp := p.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				errs = append(errs, invalid(pp.Child("name"), port.Name, msgs)...)
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		errs = append(errs, invalid(pp.Child("containerPort"), port.ContainerPort, validation.IsValidPortNum(int(port.ContainerPort)))...)
		if port.HostPort != 0 {
			errs = append(errs, invalid(pp.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))...)
		}
		// The schema defaults an absent protocol to TCP.
		if port.Protocol != "" && !slices.Contains(protocols, port.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, protocols))
		}
	}
	return errs
}

const hugePagesPrefix = "hugepages-"

// resources checks a container's compute resources: names a container may
// request, quantities that are not negative, extended resources in whole
// units, hugepages in whole pages; hugepages and extended resources, which
// are never overcommitted, with a limit equal to their request, and
// hugepages with a cpu or memory request or limit.
func resources(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	cpuOrMemory, hugePages := false, false
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range sortedNames(list.rl) {
			q := list.rl[name]
			rp := p.Child(list.name).Key(string(name))
			if msg := resourceName(string(name)); msg != "" {
				errs = append(errs, field.Invalid(rp, string(name), msg))
				continue
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(rp, q.String(), "must not be negative"))
			}
			switch {
			case name == corev1.ResourceCPU || name == corev1.ResourceMemory:
				cpuOrMemory = true
			case strings.HasPrefix(string(name), hugePagesPrefix):
				hugePages = true
				page := pageSize(string(name))
				if q.Value()%page.Value() != 0 {
					errs = append(errs, field.Invalid(rp, q.String(), fmt.Sprintf("must be a whole number of pages of %s", page.String())))
				}
			case extended(string(name)):
				if q.MilliValue()%1000 != 0 {
					errs = append(errs, field.Invalid(rp, q.String(), "must be a whole number: an extended resource is allocated in units"))
				}
			}
		}
	}
	for _, name := range sortedNames(r.Requests) {
		if resourceName(string(name)) != "" {
			continue
		}
		req := r.Requests[name]
		lim, ok := r.Limits[name]
		rp := p.Child("requests").Key(string(name))
		switch never := strings.HasPrefix(string(name), hugePagesPrefix) || extended(string(name)); {
		case never && !ok:
			errs = append(errs, field.Required(p.Child("limits").Key(string(name)), "hugepages and extended resources are never overcommitted: their limit must be set, equal to the request"))
		case never && req.Cmp(lim) != 0:
			errs = append(errs, field.Invalid(rp, req.String(), fmt.Sprintf("must equal the limit %s: hugepages and extended resources are never overcommitted", lim.String())))
		case ok && req.Cmp(lim) > 0:
			errs = append(errs, field.Invalid(rp, req.String(), fmt.Sprintf("must be less than or equal to the limit %s", lim.String())))
		}
	}
	if hugePages && !cpuOrMemory {
		errs = append(errs, field.Forbidden(p, "hugepages need a cpu or memory request or limit"))
	}
	return errs
}

// resourceName says what is wrong with a container's resource name, or "".
func resourceName(name string) string {
	if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		return strings.Join(msgs, "; ")
	}
	switch {
	case !strings.Contains(name, "/"):
		if name == string(corev1.ResourceCPU) || name == string(corev1.ResourceMemory) || name == string(corev1.ResourceEphemeralStorage) {
			return ""
		}
		if strings.HasPrefix(name, hugePagesPrefix) {
			if page := pageSize(name); page.Sign() <= 0 || page.MilliValue()%1000 != 0 {
				return "must name a page size, such as hugepages-2Mi"
			}
			return ""
		}
		return "must be cpu, memory, ephemeral-storage, hugepages-<page size> or a domain-prefixed extended resource such as example.com/device"
	case strings.Contains(name, "kubernetes.io/"):
		return ""
	case !extended(name):
		return "must be an extended resource name: a domain-prefixed qualified name, not starting with requests."
	}
	return ""
}

// extended reports whether name is an extended resource's: domain-prefixed,
// outside the kubernetes.io domain, and a qualified name with the prefix
// "requests." that quotas give it.
func extended(name string) bool {
	return strings.Contains(name, "/") && !strings.Contains(name, "kubernetes.io/") &&
		!strings.HasPrefix(name, "requests.") && len(validation.IsQualifiedName("requests."+name)) == 0
}

// pageSize is the page size a hugepages resource name names; zero when it
// names none.
func pageSize(name string) resource.Quantity {
	q, err := resource.ParseQuantity(strings.TrimPrefix(name, hugePagesPrefix))
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

func sortedNames(rl corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// volume checks a volume: its name, exactly one source, and the parts of
// the common sources that the API server checks.
func volume(v *corev1.Volume, p *field.Path) field.ErrorList {
	errs := invalid(p.Child("name"), v.Name, validation.IsDNS1123Label(v.Name))
	if n := sources(&v.VolumeSource); n != 1 {
		errs = append(errs, field.Invalid(p, v.Name, fmt.Sprintf("must set exactly one volume source, such as emptyDir, configMap, secret or persistentVolumeClaim; it sets %d", n)))
	}
	s := &v.VolumeSource
	if s.ConfigMap != nil {
		cp := p.Child("configMap")
		if s.ConfigMap.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		}
		errs = append(errs, mode(s.ConfigMap.DefaultMode, cp.Child("defaultMode"))...)
		errs = append(errs, items(s.ConfigMap.Items, cp.Child("items"))...)
	}
	if s.Secret != nil {
		sp := p.Child("secret")
		if s.Secret.SecretName == "" {
			errs = append(errs, field.Required(sp.Child("secretName"), ""))
		}
		errs = append(errs, mode(s.Secret.DefaultMode, sp.Child("defaultMode"))...)
		errs = append(errs, items(s.Secret.Items, sp.Child("items"))...)
	}
	if s.EmptyDir != nil && s.EmptyDir.SizeLimit != nil && s.EmptyDir.SizeLimit.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("emptyDir", "sizeLimit"), s.EmptyDir.SizeLimit.String(), "must not be negative"))
	}
	if s.HostPath != nil {
		hp := p.Child("hostPath")
		if s.HostPath.Path == "" {
			errs = append(errs, field.Required(hp.Child("path"), ""))
		} else if slices.Contains(strings.Split(s.HostPath.Path, "/"), "..") {
			errs = append(errs, field.Invalid(hp.Child("path"), s.HostPath.Path, "must not contain '..'"))
		}
		if t := s.HostPath.Type; t != nil && !slices.Contains(hostPathTypes, *t) {
			errs = append(errs, field.NotSupported(hp.Child("type"), *t, hostPathTypes))
		}
	}
	if s.PersistentVolumeClaim != nil && s.PersistentVolumeClaim.ClaimName == "" {
		errs = append(errs, field.Required(p.Child("persistentVolumeClaim", "claimName"), ""))
	}
	if s.DownwardAPI != nil {
		dp := p.Child("downwardAPI")
		errs = append(errs, mode(s.DownwardAPI.DefaultMode, dp.Child("defaultMode"))...)
		for i, it := range s.DownwardAPI.Items {
			ip := dp.Child("items").Index(i)
			errs = append(errs, filePath(it.Path, ip.Child("path"))...)
			errs = append(errs, mode(it.Mode, ip.Child("mode"))...)
		}
	}
	if s.Projected != nil {
		pp := p.Child("projected")
		errs = append(errs, mode(s.Projected.DefaultMode, pp.Child("defaultMode"))...)
		for i, src := range s.Projected.Sources {
			sp := pp.Child("sources").Index(i)
			if src.ConfigMap != nil {
				errs = append(errs, items(src.ConfigMap.Items, sp.Child("configMap", "items"))...)
			}
			if src.Secret != nil {
				errs = append(errs, items(src.Secret.Items, sp.Child("secret", "items"))...)
			}
			if src.DownwardAPI != nil {
				for j, it := range src.DownwardAPI.Items {
					ip := sp.Child("downwardAPI", "items").Index(j)
					errs = append(errs, filePath(it.Path, ip.Child("path"))...)
					errs = append(errs, mode(it.Mode, ip.Child("mode"))...)
				}
			}
			if src.ServiceAccountToken != nil {
				errs = append(errs, filePath(src.ServiceAccountToken.Path, sp.Child("serviceAccountToken", "path"))...)
			}
		}
	}
	return errs
}

var hostPathTypes = []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
	corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}

// sources counts the volume sources s sets: each is a pointer field.
func sources(s *corev1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

// items checks the keys a ConfigMap or Secret volume projects, and where.
func items(kps []corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, kp := range kps {
		ip := p.Index(i)
		if kp.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		errs = append(errs, filePath(kp.Path, ip.Child("path"))...)
		errs = append(errs, mode(kp.Mode, ip.Child("mode"))...)
	}
	return errs
}

// filePath checks where a volume puts a file: a path inside the volume, not
// starting with "..", which the kubelet keeps for itself.
func filePath(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	errs := descending(s, p)
	if strings.HasPrefix(s, "..") && !slices.Contains(strings.Split(s, "/"), "..") {
		errs = append(errs, field.Invalid(p, s, "must not start with '..'"))
	}
	return errs
}

// descending checks a path that must stay below where it starts: relative,
// without a '..' element.
func descending(s string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(s) {
		errs = append(errs, field.Invalid(p, s, "must be a relative path"))
	}
	if slices.Contains(strings.Split(s, "/"), "..") {
		errs = append(errs, field.Invalid(p, s, "must not contain '..'"))
	}
	return errs
}

// mode checks a file mode: from 0 to 0777 (511).
func mode(m *int32, p *field.Path) field.ErrorList {
	if m != nil && (*m < 0 || *m > 0o777) {
		return field.ErrorList{field.Invalid(p, *m, "must be a file mode from 0 to 0777 (511)")}
	}
	return nil
}

func invalid(p *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, m := range msgs {
		errs = append(errs, field.Invalid(p, value, m))
	}
	return errs
}
