package realenvoy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/proxy"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// Kubelet does a kubelet's part for the Envoy containers of a namespace's
// pods, on this host: for each Running pod that Selector picks and that has
// an Envoy container (a fleet's proxy or an injected sidecar), it runs one
// Envoy (Run) from the pod's spec, ConfigMap and Secret, and when the pod is
// being deleted, or is gone (KWOK removes a deleted pod at once), it runs
// the container's preStop hook against that Envoy, then stops it, as a
// kubelet does before SIGTERM.
type Kubelet struct {
	Client    kubernetes.Interface
	Namespace string
	// Selector is a label selector of the pods; empty, every pod.
	Selector string
	// Envoy is the binary; XDS the operator's xDS server, host:port.
	Envoy, XDS string
	// Dir holds each proxy's root (Dir/POD) and log (Dir/POD.log).
	Dir string
	// Delta has the Envoys use the incremental xDS protocol (Host.Delta).
	Delta bool
	// PodNetwork runs each Envoy in a network namespace of its pod's own
	// (podnet.AddPod, RunPod; root only), removed once Envoy has stopped:
	// fleets then listen on the same ports without meeting. Off, every
	// Envoy runs in the host's network on ports of its own (Run).
	PodNetwork bool

	mu    sync.Mutex
	procs map[string]*Process
	// pods are the pods the Envoys run for, as they were started.
	pods map[string]*corev1.Pod
	// stopping are the pods whose preStop hook runs or has run.
	stopping map[string]bool
	// nets are the pods' own network namespaces, with PodNetwork.
	nets map[string]podnet.Pod
	// netErrs are the failures to remove a pod's network namespace that
	// no Sync has returned yet.
	netErrs []error
	wg      sync.WaitGroup
}

// Run syncs every interval until ctx ends, then stops every Envoy.
func (k *Kubelet) Run(ctx context.Context, interval time.Duration, report func(error)) {
	defer k.StopAll()
	for {
		if err := k.Sync(ctx); err != nil && ctx.Err() == nil && report != nil {
			report(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// Sync starts an Envoy for each Running pod that has none, and stops those
// whose pod is being deleted or gone.
func (k *Kubelet) Sync(ctx context.Context) error {
	pods, err := k.Client.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: k.Selector})
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.procs == nil {
		k.procs, k.stopping, k.pods = map[string]*Process{}, map[string]bool{}, map[string]*corev1.Pod{}
		k.nets = map[string]podnet.Pod{}
	}
	live := map[string]bool{}
	var errs []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !hasEnvoy(pod) {
			continue
		}
		live[pod.Name] = true
		p, running := k.procs[pod.Name]
		switch {
		case pod.DeletionTimestamp != nil && running && !k.stopping[pod.Name]:
			k.stopping[pod.Name] = true
			k.wg.Add(1)
			go func() {
				defer k.wg.Done()
				k.terminate(pod, p)
			}()
		case pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning && !running:
			if err := k.start(ctx, pod); err != nil {
				errs = append(errs, fmt.Sprintf("pod %s: %v", pod.Name, err))
			}
		case running:
			if done, err := p.Exited(); done && !k.stopping[pod.Name] {
				// Envoy exited by itself: start it again, as the kubelet
				// restarts a container, and say so.
				delete(k.procs, pod.Name)
				errs = append(errs, fmt.Sprintf("pod %s: Envoy exited (%v); its log: %s", pod.Name, err, filepath.Join(k.Dir, pod.Name+".log")))
			}
		}
	}
	for name, p := range k.procs {
		if !live[name] {
			pod := k.pods[name]
			delete(k.procs, name)
			delete(k.pods, name)
			if !k.stopping[name] {
				k.wg.Add(1)
				go func() {
					defer k.wg.Done()
					k.terminate(pod, p)
				}()
			}
			delete(k.stopping, name)
		}
	}
	for _, err := range k.netErrs {
		errs = append(errs, err.Error())
	}
	k.netErrs = nil
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func hasEnvoy(pod *corev1.Pod) bool {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		if slices.ContainsFunc(list, func(c corev1.Container) bool { return c.Name == proxy.ContainerName }) {
			return true
		}
	}
	return false
}

func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod) error {
	cms := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			cm, err := k.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue // FromPod says which one is missing, if the container mounts it
			} else if err != nil {
				return err
			}
			cms[cm.Name] = cm
		case v.Secret != nil:
			s, err := k.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				return err
			}
			secrets[s.Name] = s
		}
	}
	p, err := FromPod(pod, cms, secrets)
	if err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(k.Dir, pod.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	root := filepath.Join(k.Dir, pod.Name)
	var proc *Process
	if k.PodNetwork {
		var net podnet.Pod
		if net, err = podnet.AddPod(pod.Namespace, pod.Name, pod.Status.PodIP); err == nil {
			if proc, err = RunPod(k.Envoy, p, net, root, k.XDS, k.Delta, log); err != nil {
				err = errors.Join(err, net.Remove())
			} else {
				k.nets[pod.Name] = net
			}
		}
	} else {
		proc, err = Run(k.Envoy, p, root, k.XDS, k.Delta, log)
	}
	if err != nil {
		_ = log.Close()
		return err
	}
	go func() {
		<-proc.Done()
		_ = log.Close()
	}()
	k.procs[pod.Name], k.pods[pod.Name] = proc, pod.DeepCopy()
	return nil
}

// terminate runs the Envoy container's preStop hook against p, as the
// kubelet runs it in the container, then stops Envoy.
func (k *Kubelet) terminate(pod *corev1.Pod, p *Process) {
	k.mu.Lock()
	net, inPod := k.nets[pod.Name]
	k.mu.Unlock()
	if hook := preStop(pod); hook != nil {
		var cmd *exec.Cmd
		if inPod {
			cmd = podnet.Command(net.Netns, hook[0], hook[1:]...)
		} else {
			port := strings.TrimPrefix(p.Admin, "http://127.0.0.1:")
			cmd = exec.Command(hook[0], adminPortIn(hook[1:], port)...)
		}
		_ = cmd.Run()
	}
	p.Stop(5 * time.Second)
	if inPod {
		k.removeNet(pod.Name, p, net)
	}
}

// removeNet removes a pod's network namespace once its Envoy p has
// stopped, unless another Envoy of the pod uses it, and keeps the error for
// Sync.
func (k *Kubelet) removeNet(name string, p *Process, net podnet.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if other, ok := k.procs[name]; ok && other != p {
		return
	}
	delete(k.nets, name)
	if err := net.Remove(); err != nil {
		k.netErrs = append(k.netErrs, fmt.Errorf("pod %s: %w", name, err))
	}
}

func preStop(pod *corev1.Pod) []string {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			if c.Name == proxy.ContainerName && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Exec != nil {
				return c.Lifecycle.PreStop.Exec.Command
			}
		}
	}
	return nil
}

// adminPortIn is the hook's command with the pod's admin address, on
// loopback, moved to the host proxy's port.
func adminPortIn(args []string, port string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "/dev/tcp/127.0.0.1/"+strconv.Itoa(proxy.AdminPort), "/dev/tcp/127.0.0.1/"+port)
	}
	return out
}

// Processes returns the Envoys running, by pod name.
func (k *Kubelet) Processes() map[string]*Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]*Process{}
	for name, p := range k.procs {
		out[name] = p
	}
	return out
}

// WaitLive waits until n Envoys run and each says LIVE: it has its first
// configuration. It fails t after timeout, and returns the Envoys by pod name.
func (k *Kubelet) WaitLive(t testing.TB, n int, timeout time.Duration) map[string]*Process {
	t.Helper()
	var procs map[string]*Process
	testenv.Poll(t, 50*time.Millisecond, timeout, fmt.Sprintf("%d Envoys LIVE", n), func() (bool, error) {
		procs = k.Processes()
		if len(procs) != n {
			return false, fmt.Errorf("%d Envoys run", len(procs))
		}
		for name, p := range procs {
			if !p.IsReady(context.Background()) {
				return false, fmt.Errorf("the Envoy of %s is not LIVE", name)
			}
		}
		return true, nil
	})
	return procs
}

// StopAll stops every Envoy and waits for the hooks that run.
func (k *Kubelet) StopAll() {
	k.mu.Lock()
	for name, p := range k.procs {
		p.Stop(5 * time.Second)
		delete(k.procs, name)
		delete(k.pods, name)
	}
	k.mu.Unlock()
	k.wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, net := range k.nets {
		delete(k.nets, name)
		if err := net.Remove(); err != nil {
			k.netErrs = append(k.netErrs, fmt.Errorf("pod %s: %w", name, err))
		}
	}
}

// NetworkErrors returns the failures to remove a pod's network namespace
// (PodNetwork) that no Sync has returned: after StopAll, those of its own.
func (k *Kubelet) NetworkErrors() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := errors.Join(k.netErrs...)
	k.netErrs = nil
	return err
}

// Start runs k (Run, every second) until the stop it returns is called,
// which returns once every Envoy has stopped. report is told of each sync
// that failed.
func (k *Kubelet) Start(report func(error)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Run(ctx, time.Second, report)
	}()
	return func() { cancel(); <-done }
}
