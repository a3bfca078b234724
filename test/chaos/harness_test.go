//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/test/bench/measure"
)

// operator is the operator's process, which the chaos kills and starts again.
type operator struct {
	bin     string
	args    []string
	log     string // appended to by every run
	health  string // host:port of /readyz
	pidfile string // the running process's pid, for the script's cleanup

	cmd  *exec.Cmd
	done chan error
}

// operatorFromEnv describes the operator as hack/e2e.sh starts it.
func operatorFromEnv(t *testing.T) *operator {
	t.Helper()
	o := &operator{
		bin:     os.Getenv("OPERATOR_BIN"),
		args:    strings.Split(os.Getenv("OPERATOR_ARGS"), "\n"), // one a line
		log:     os.Getenv("OPERATOR_LOG"),
		health:  os.Getenv("OPERATOR_HEALTH_ADDR"),
		pidfile: os.Getenv("OPERATOR_PIDFILE"),
	}
	if o.bin == "" || o.log == "" || o.health == "" || o.pidfile == "" {
		t.Fatal("OPERATOR_BIN, OPERATOR_ARGS, OPERATOR_LOG, OPERATOR_HEALTH_ADDR and OPERATOR_PIDFILE are unset: run the chaos suite with make chaos")
	}
	t.Cleanup(func() {
		if o.cmd != nil { // the test failed with the operator running
			o.signal(syscall.SIGKILL)
			<-o.done
		}
	})
	return o
}

// start starts the operator and waits until it is ready.
func (o *operator) start(t *testing.T) {
	t.Helper()
	log, err := os.OpenFile(o.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(o.bin, o.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o.cmd, o.done = cmd, make(chan error, 1)
	go func() { o.done <- cmd.Wait() }()
	if err := os.WriteFile(o.pidfile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-o.done:
			o.cmd = nil
			t.Fatalf("the operator exited at start: %v (log: %s)", err, o.log)
		default:
		}
		if resp, err := http.Get("http://" + o.health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator is not ready after a minute (log: %s)", o.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (o *operator) signal(s syscall.Signal) {
	if o.cmd != nil {
		_ = o.cmd.Process.Signal(s)
	}
}

// kill SIGKILLs the operator: no shutdown, no cleanup, as a node that dies.
func (o *operator) kill(t *testing.T) {
	t.Helper()
	o.signal(syscall.SIGKILL)
	<-o.done
	o.cmd = nil
	_ = os.Remove(o.pidfile)
}

// stop stops the operator as a rolling update would, and fails unless it
// exits cleanly within a minute (a race-enabled build exits 66 after it
// reported a data race).
func (o *operator) stop(t *testing.T) {
	t.Helper()
	o.signal(syscall.SIGTERM)
	select {
	case err := <-o.done:
		o.cmd = nil
		_ = os.Remove(o.pidfile)
		if err != nil {
			t.Errorf("the operator exited with %v on SIGTERM", err)
		}
	case <-time.After(time.Minute):
		t.Error("the operator did not stop within a minute of SIGTERM")
	}
}

// cluster is the kwokctl cluster the chaos runs on.
type cluster struct {
	name    string
	kwokctl string
	workdir string // kwokctl's directory of the cluster: pids/, logs/
}

func clusterFromEnv(t *testing.T) cluster {
	t.Helper()
	c := cluster{name: os.Getenv("CHAOS_CLUSTER"), kwokctl: filepath.Join(os.Getenv("CHAOS_ROOT"), "bin", "kwokctl")}
	if c.name == "" || os.Getenv("CHAOS_ROOT") == "" {
		t.Fatal("CHAOS_CLUSTER and CHAOS_ROOT are unset: run the chaos suite with make chaos")
	}
	base := os.Getenv("KWOK_WORKDIR") // kwokctl's own variable; ~/.kwok by default
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		base = filepath.Join(home, ".kwok")
	}
	c.workdir = filepath.Join(base, "clusters", c.name)
	if _, err := os.Stat(filepath.Join(c.workdir, "pids")); err != nil {
		t.Fatalf("cluster %s: %v", c.name, err)
	}
	return c
}

// restart SIGKILLs one of the cluster's components (kube-apiserver, etcd),
// as kwokctl's own stop does, and starts it again: kwokctl's start cluster
// starts the components whose process is gone, with their flags, and waits
// until the cluster serves again.
//
// From the kill until the component listens again its port is free, and
// kwokctl gives a cluster being created the first free port it finds from
// 32767 down: it holds the lock that hack/cluster.sh holds around every
// creation and start, across every checkout, for that time.
func (c cluster) restart(ctx context.Context, component string) error {
	unlock, err := lockClusterStarts()
	if err != nil {
		return err
	}
	defer unlock()
	pidfile := filepath.Join(c.workdir, "pids", component+".pid")
	raw, err := os.ReadFile(pidfile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("%s: %w", pidfile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", component, pid, err)
	}
	for alive(pid) {
		if ctx.Err() != nil {
			return fmt.Errorf("%s (pid %d) still runs after SIGKILL", component, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.Remove(pidfile); err != nil {
		return err
	}
	// The bound only ends a start that will not succeed; a busy machine
	// takes kube-apiserver tens of seconds to start.
	out, err := exec.CommandContext(ctx, c.kwokctl, "--name", c.name, "start", "cluster", "--wait", "2m").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kwokctl start cluster: %v: %s", err, out)
	}
	return nil
}

// lockClusterStarts takes hack/cluster.sh's lock on cluster creations and
// starts, and returns its release.
func lockClusterStarts() (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "kube-envoy-controller-kwokctl.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking cluster starts: %w", err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}

// alive reports whether process pid may still hold what it opened (the
// component's listening port): it exists and is no zombie, or it is a zombie
// whose other threads are still exiting. A multi-threaded process's leader
// turns zombie before the rest of its threads have exited, and its files are
// closed only when the last of them has: a component started again in
// between finds its port in use.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) || s[i+2] != 'Z' {
		return true
	}
	threads, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err == nil && len(threads) > 1
}

// audit returns the cluster's audit log: the write requests of the chaos
// namespace and of the webhook configurations (test/chaos/audit-policy.yaml).
func (c cluster) audit(t *testing.T) []measure.AuditEvent {
	t.Helper()
	out, err := exec.Command(c.kwokctl, "--name", c.name, "logs", "audit").Output()
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	events, err := measure.ParseAudit(out)
	if err != nil {
		t.Fatal(err)
	}
	return events
}
