package objects

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Deployments compares a Deployment's labels and spec with the desired ones.
// An update puts back the replicas and pod template, keeping the labels and
// template labels and annotations others added.
var Deployments = Child[*appsv1.Deployment]{
	Kind: "Deployment",
	Matches: func(existing, desired *appsv1.Deployment) (bool, error) {
		return labelsAndSpec(existing.Labels, desired.Labels, existing.Spec, desired.Spec)
	},
	Merge: func(existing, desired *appsv1.Deployment) *appsv1.Deployment {
		out := existing.DeepCopy()
		out.Labels = MergeMaps(existing.Labels, desired.Labels)
		out.Spec.Replicas = desired.Spec.Replicas
		tmpl := desired.Spec.Template.DeepCopy()
		tmpl.Labels = MergeMaps(existing.Spec.Template.Labels, tmpl.Labels)
		tmpl.Annotations = MergeMaps(existing.Spec.Template.Annotations, tmpl.Annotations)
		out.Spec.Template = *tmpl
		return out
	},
}

// Services compares a Service's labels, type, selector and ports. An update
// keeps the node ports the API server allocated, where the type still has them.
var Services = Child[*corev1.Service]{
	Kind: "Service",
	Matches: func(existing, desired *corev1.Service) (bool, error) {
		return labelsAndSpec(existing.Labels, desired.Labels, existing.Spec, desired.Spec)
	},
	Merge: func(existing, desired *corev1.Service) *corev1.Service {
		out := existing.DeepCopy()
		out.Labels = MergeMaps(existing.Labels, desired.Labels)
		out.Spec.Type = desired.Spec.Type
		out.Spec.Selector = desired.Spec.Selector
		nodePorts := map[string]int32{}
		for _, p := range existing.Spec.Ports {
			nodePorts[p.Name] = p.NodePort
		}
		out.Spec.Ports = append([]corev1.ServicePort(nil), desired.Spec.Ports...)
		for i := range out.Spec.Ports {
			if desired.Spec.Type != corev1.ServiceTypeClusterIP && out.Spec.Ports[i].NodePort == 0 {
				out.Spec.Ports[i].NodePort = nodePorts[out.Spec.Ports[i].Name]
			}
		}
		return out
	},
}

// ConfigMaps compares a ConfigMap's labels, and its data exactly: a key
// someone added is removed.
var ConfigMaps = Child[*corev1.ConfigMap]{
	Kind: "ConfigMap",
	Matches: func(existing, desired *corev1.ConfigMap) (bool, error) {
		ok, err := Contains(existing.Labels, desired.Labels)
		return ok && maps.Equal(existing.Data, desired.Data) &&
			maps.EqualFunc(existing.BinaryData, desired.BinaryData, bytesEqual), err
	},
	Merge: func(existing, desired *corev1.ConfigMap) *corev1.ConfigMap {
		out := existing.DeepCopy()
		out.Labels = MergeMaps(existing.Labels, desired.Labels)
		out.Data = desired.Data
		out.BinaryData = desired.BinaryData
		return out
	},
}

// Secrets compares a Secret's labels, and its type and data exactly.
var Secrets = Child[*corev1.Secret]{
	Kind: "Secret",
	Matches: func(existing, desired *corev1.Secret) (bool, error) {
		ok, err := Contains(existing.Labels, desired.Labels)
		return ok && existing.Type == desired.Type && maps.EqualFunc(existing.Data, desired.Data, bytesEqual), err
	},
	Merge: func(existing, desired *corev1.Secret) *corev1.Secret {
		out := existing.DeepCopy()
		out.Labels = MergeMaps(existing.Labels, desired.Labels)
		out.Data = desired.Data
		return out
	},
}

// PodDisruptionBudgets compares a budget's labels, and its spec exactly: it
// has one of minAvailable and maxUnavailable, so a budget that changed from
// one to the other must lose the first, and the API server defaults none
// of its fields. An update puts the spec back, keeping the labels others
// added.
var PodDisruptionBudgets = Child[*policyv1.PodDisruptionBudget]{
	Kind: "PodDisruptionBudget",
	Matches: func(existing, desired *policyv1.PodDisruptionBudget) (bool, error) {
		ok, err := Contains(existing.Labels, desired.Labels)
		return ok && equality.Semantic.DeepEqual(existing.Spec, desired.Spec), err
	},
	Merge: func(existing, desired *policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
		out := existing.DeepCopy()
		out.Labels = MergeMaps(existing.Labels, desired.Labels)
		out.Spec = *desired.Spec.DeepCopy()
		return out
	},
}

// NetworkPolicies compares a policy's labels, and its spec exactly: a rule
// someone added opens what the policy closes, so it is removed. An update
// puts the spec back, keeping the labels others added.
var NetworkPolicies = Child[*networkingv1.NetworkPolicy]{
	Kind: "NetworkPolicy",
	Matches: func(existing, desired *networkingv1.NetworkPolicy) (bool, error) {
		ok, err := Contains(existing.Labels, desired.Labels)
		return ok && equality.Semantic.DeepEqual(existing.Spec, desired.Spec), err
	},
	Merge: func(existing, desired *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
		out := existing.DeepCopy()
		out.Labels = MergeMaps(existing.Labels, desired.Labels)
		out.Spec = *desired.Spec.DeepCopy()
		return out
	},
}

// HorizontalPodAutoscalers compares an autoscaler's labels and spec with the
// desired ones (the API server defaults its behavior); an update puts the
// spec back. Its status is the autoscaler's own.
var HorizontalPodAutoscalers = Child[*autoscalingv2.HorizontalPodAutoscaler]{
	Kind: "HorizontalPodAutoscaler",
	Matches: func(existing, desired *autoscalingv2.HorizontalPodAutoscaler) (bool, error) {
		return labelsAndSpec(existing.Labels, desired.Labels, existing.Spec, desired.Spec)
	},
	Merge: func(existing, desired *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
		out := existing.DeepCopy()
		out.Labels = MergeMaps(existing.Labels, desired.Labels)
		out.Spec = *desired.Spec.DeepCopy()
		return out
	},
}

// Jobs are create-only: a Job's pod template cannot change, and a Job that
// ran is a record of that run. Whether a Job should exist at all is its
// owner's decision (see internal/controller/foobar's Desired).
var Jobs = Child[*batchv1.Job]{
	Kind:    "Job",
	Matches: func(_, _ *batchv1.Job) (bool, error) { return true, nil },
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// labelsAndSpec reports whether the existing labels and spec contain the desired ones.
func labelsAndSpec(existingLabels, desiredLabels map[string]string, existingSpec, desiredSpec any) (bool, error) {
	ok, err := Contains(existingLabels, desiredLabels)
	if err != nil || !ok {
		return false, err
	}
	return Contains(existingSpec, desiredSpec)
}
