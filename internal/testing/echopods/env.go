package echopods

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Env returns container c's environment in pod, NAME=value, as the kubelet
// gives it: values with $(NAME) of the variables before them expanded,
// fieldRef (metadata.name, metadata.namespace, metadata.uid,
// spec.nodeName, spec.serviceAccountName, status.podIP, status.hostIP),
// secretKeyRef and configMapKeyRef. Anything else is an error that names it.
func Env(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	values := map[string]string{}
	var out []string
	for _, e := range c.Env {
		v, err := value(ctx, cs, pod, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if e.ValueFrom == nil {
			v = expand(v, values)
		}
		values[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

func value(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, e corev1.EnvVar) (string, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return e.Value, nil
	case from.FieldRef != nil:
		switch from.FieldRef.FieldPath {
		case "metadata.name":
			return pod.Name, nil
		case "metadata.namespace":
			return pod.Namespace, nil
		case "metadata.uid":
			return string(pod.UID), nil
		case "spec.nodeName":
			return pod.Spec.NodeName, nil
		case "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		case "status.podIP":
			return pod.Status.PodIP, nil
		case "status.hostIP":
			return pod.Status.HostIP, nil
		}
		return "", fmt.Errorf("fieldRef %s is not resolved here", from.FieldRef.FieldPath)
	case from.SecretKeyRef != nil:
		s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := s.Data[from.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("Secret %s has no key %s", s.Name, from.SecretKeyRef.Key)
		}
		return string(v), nil
	case from.ConfigMapKeyRef != nil:
		cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := cm.Data[from.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("ConfigMap %s has no key %s", cm.Name, from.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", fmt.Errorf("its source is not resolved here")
}

// expand replaces $(NAME) with values' NAME, as the kubelet does.
func expand(s string, values map[string]string) string {
	for k, v := range values {
		s = strings.ReplaceAll(s, "$("+k+")", v)
	}
	return s
}

// writeVolumes writes the Secret and ConfigMap volumes that c mounts under
// root (a volume mounted at /p is root/p), makes its empty directories and
// returns the mounts' paths in the container.
func writeVolumes(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, root string) ([]string, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("mount %s names no volume", m.Name)
		}
		var data map[string][]byte
		var items []corev1.KeyToPath
		switch {
		case v.Secret != nil:
			s, err := cs.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			data, items = s.Data, v.Secret.Items
		case v.ConfigMap != nil:
			cm, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			data, items = map[string][]byte{}, v.ConfigMap.Items
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
		case v.EmptyDir != nil, v.Projected != nil:
			// The ServiceAccount's token is projected: echo-basic reads none.
		default:
			return nil, fmt.Errorf("volume %s is of a kind not mounted here", v.Name)
		}
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		if len(items) == 0 {
			for k, b := range data {
				files[k] = b
			}
		}
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("volume %s has no key %s", v.Name, it.Key)
			}
			files[it.Path] = b
		}
		for name, b := range files {
			path := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				return nil, err
			}
		}
		mounts = append(mounts, m.MountPath)
	}
	return mounts, nil
}
