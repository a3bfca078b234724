package realenvoy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// What `envoy --mode validate` cannot show: whether Envoy can listen on
// its listeners' addresses, which it finds out only once it binds them and
// starts to listen. ListeningOn runs Envoy for that.

// ListeningOn runs Envoy on bootstrap (YAML, whose admin interface listens
// on 127.0.0.1) in dir until it serves, and returns the names of the
// listeners that listen then, with what Envoy logged. When Envoy exits
// before it serves, it returns an error wrapping ErrRefused with what Envoy
// said. Envoy is stopped before ListeningOn returns.
func ListeningOn(envoy, dir string, bootstrap []byte) ([]string, string, error) {
	config := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(config, bootstrap, 0o600); err != nil {
		return nil, "", err
	}
	adminPath := filepath.Join(dir, "admin-address")
	logPath := filepath.Join(dir, "envoy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close()
	cmd := exec.Command(envoy, "-c", config, "--admin-address-path", adminPath,
		"--service-node", "listen", "--service-cluster", "listen", "--log-level", "warning",
		"--disable-hot-restart", "--log-format", "%v", "--concurrency", "1")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	logged := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	// Envoy comes up in well under a second; the limit is for an Envoy
	// that hangs, and is no assertion on its speed.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return nil, logged(), fmt.Errorf("%w: Envoy exited (%v): %s", ErrRefused, err, strings.TrimSpace(logged()))
		case <-ctx.Done():
			stop()
			return nil, logged(), fmt.Errorf("Envoy did not serve: %s", logged())
		case <-tick.C:
		}
		admin, err := os.ReadFile(adminPath)
		if err != nil || len(admin) == 0 {
			continue
		}
		if body, err := adminGet(ctx, string(admin), "/ready"); err != nil || strings.TrimSpace(body) != "LIVE" {
			continue
		}
		body, err := adminGet(ctx, string(admin), "/listeners?format=json")
		stop()
		if err != nil {
			return nil, logged(), err
		}
		var ls struct {
			ListenerStatuses []struct{ Name string } `json:"listener_statuses"`
		}
		if err := json.Unmarshal([]byte(body), &ls); err != nil {
			return nil, logged(), fmt.Errorf("/listeners: %w: %s", err, body)
		}
		var names []string
		for _, l := range ls.ListenerStatuses {
			names = append(names, l.Name)
		}
		return names, logged(), nil
	}
}

func adminGet(ctx context.Context, address, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+strings.TrimSpace(address)+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New(resp.Status)
	}
	return string(b), err
}

// UnusedPort returns a TCP port that nothing listens on at 127.0.0.1, nor
// on the wildcard address, at the time of the call.
func UnusedPort() (int, error) {
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
