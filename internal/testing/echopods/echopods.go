// Package echopods runs the Gateway API conformance suite's echo backend
// for the pods that would run its image: KWOK's pods run nothing, so for
// each Running pod with a container of the image gateway-api/echo-basic,
// Runner starts the echo-basic binary in a network namespace of the pod's
// own (podnet.AddPod), with the container's environment as the kubelet
// would give it and its Secret and ConfigMap volumes written under a
// directory of the pod's, so that the backend answers at the pod's address
// as the pod (its JSON names the pod and its namespace), on every port it
// would listen on, TLS included.
//
// Invariant: one echo-basic per such pod for as long as the pod is Running
// and not being deleted; once it is not, the process is stopped and the
// pod's network namespace removed. Root only, as podnet is.
package echopods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/podnet"
	"github.com/kube-envoy-controller/kube-envoy-controller/internal/testing/testenv"
)

// Image is what the image of an echo pod's container contains.
const Image = "gateway-api/echo-basic"

// Runner runs echo-basic for the echo pods of a namespace.
type Runner struct {
	Client kubernetes.Interface
	// Namespace holds the pods; empty, every namespace.
	Namespace string
	// Binary is echo-basic, built from sigs.k8s.io/gateway-api/conformance/echo-basic.
	Binary string
	// Dir holds each pod's files (Dir/NAMESPACE_POD) and output
	// (Dir/NAMESPACE_POD.log).
	Dir string

	mu    sync.Mutex
	procs map[string]*process // by namespace/name
}

type process struct {
	cmd  *exec.Cmd
	net  podnet.Pod
	done chan struct{}
	err  error
}

// Addresses returns the pods whose echo-basic runs (namespace/name) and
// their addresses.
func (r *Runner) Addresses() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for key, p := range r.procs {
		out[key] = p.net.IP
	}
	return out
}

// Sync starts echo-basic for each echo pod that is Running and has none,
// and stops those whose pod is being deleted, not Running or gone.
func (r *Runner) Sync(ctx context.Context) error {
	pods, err := r.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs == nil {
		r.procs = map[string]*process{}
	}
	live := map[string]bool{}
	var errs []error
	for i := range pods.Items {
		pod := &pods.Items[i]
		c := echoContainer(pod)
		if c == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		live[key] = true
		if p := r.procs[key]; p != nil {
			select {
			case <-p.done:
				// It exited by itself: start it again, as the kubelet
				// restarts a container, and say so.
				errs = append(errs, fmt.Errorf("pod %s: echo-basic exited (%v); its output: %s", key, p.err, r.log(pod)))
				errs = append(errs, p.stop())
				delete(r.procs, key)
			default:
				continue
			}
		}
		p, err := r.start(ctx, pod, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", key, err))
			continue
		}
		r.procs[key] = p
	}
	for key, p := range r.procs {
		if !live[key] {
			errs = append(errs, p.stop())
			delete(r.procs, key)
		}
	}
	return errors.Join(errs...)
}

func echoContainer(pod *corev1.Pod) *corev1.Container {
	for i, c := range pod.Spec.Containers {
		if strings.Contains(c.Image, Image) {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func (r *Runner) dir(pod *corev1.Pod) string {
	return filepath.Join(r.Dir, pod.Namespace+"_"+pod.Name)
}

func (r *Runner) log(pod *corev1.Pod) string { return r.dir(pod) + ".log" }

// start writes the pod's volumes, makes its network namespace and starts
// echo-basic there with the container's environment.
func (r *Runner) start(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (*process, error) {
	bin, err := filepath.Abs(r.Binary)
	if err != nil {
		return nil, err
	}
	root := r.dir(pod)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	mounts, err := writeVolumes(ctx, r.Client, pod, c, root)
	if err != nil {
		return nil, err
	}
	env, err := Env(ctx, r.Client, pod, c)
	if err != nil {
		return nil, err
	}
	for i, e := range env {
		name, value, _ := strings.Cut(e, "=")
		for _, m := range mounts {
			if value == m || strings.HasPrefix(value, m+"/") {
				env[i] = name + "=" + filepath.Join(root, value)
			}
		}
	}
	log, err := os.OpenFile(r.log(pod), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	net, err := podnet.AddPod(pod.Namespace, pod.Name, pod.Status.PodIP)
	if err != nil {
		return nil, errors.Join(err, log.Close())
	}
	cmd := podnet.Command(net.Netns, bin)
	cmd.Env, cmd.Dir = env, root
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(err, log.Close(), net.Remove())
	}
	p := &process{cmd: cmd, net: net, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends echo-basic SIGTERM, as the kubelet does, SIGKILL if it has not
// exited within 5 s, then removes the pod's network namespace.
func (p *process) stop() error {
	select {
	case <-p.done:
	default:
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return err
			}
			<-p.done
		}
	}
	return p.net.Remove()
}

// StopAll stops every echo-basic and removes the pods' network namespaces.
func (r *Runner) StopAll() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for key, p := range r.procs {
		errs = append(errs, p.stop())
		delete(r.procs, key)
	}
	return errors.Join(errs...)
}

// Start syncs every second until the stop it returns is called, which
// stops every echo-basic and returns what StopAll returned. report is told
// of each sync that failed.
func (r *Runner) Start(report func(error)) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if err := r.Sync(ctx); err != nil && ctx.Err() == nil {
				report(err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() error {
		cancel()
		<-done
		return r.StopAll()
	}
}

// Binary returns the path of echo-basic: $ECHO_BASIC, else bin/echo-basic
// of the repository (make tools builds it).
func Binary() (string, error) {
	path := os.Getenv("ECHO_BASIC")
	if path == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, "bin", "echo-basic")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no echo-basic at %s (make tools builds it): %w", path, err)
	}
	return path, nil
}
