package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeAdmin is Envoy's admin interface as the drain script meets it: it
// records the requests, in order, and answers the connection count with the
// next of open (the last one forever after).
type fakeAdmin struct {
	mu       sync.Mutex
	requests []string
	open     []int
	// chunked streams the stats, as Envoy's admin does, instead of sending
	// them with a Content-Length.
	chunked bool
}

func (a *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.RequestURI())
	n := a.open[0]
	if len(a.open) > 1 && r.URL.Path == "/stats" {
		a.open = a.open[1:]
	}
	a.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && (r.URL.Path == "/healthcheck/fail" || r.URL.Path == "/drain_listeners"):
		fmt.Fprintln(w, "OK")
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
		// What Envoy prints for the filter, one stat a line.
		fmt.Fprintln(w, "listener_manager.total_filter_chains_draining: 0")
		if a.chunked {
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "server.total_connections: %d\n", n)
	default:
		http.Error(w, "no such endpoint", http.StatusNotFound)
	}
}

func (a *fakeAdmin) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests)
}

// runDrain runs the drain script with bash against the admin interface on
// port, and fails the test unless it exits 0.
func runDrain(t *testing.T, port, minChecks, maxChecks int) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the drain script's test needs bash:", err)
	}
	script := drainScript(drainParams{AdminPort: port, MinChecks: minChecks, MaxChecks: maxChecks, Interval: "0", Deadline: 3600})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "bash", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("the drain script failed: %v\n%s", err, out)
	}
}

func portOf(t *testing.T, srv *httptest.Server) int {
	t.Helper()
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// The drain script, run by bash against a fake admin interface: health
// checks fail first, then the listeners drain gracefully, then it checks
// the open connections until none is left after the minimum of checks, or
// the maximum is reached.
func TestDrainScript(t *testing.T) {
	const stats = "GET /stats?filter=server.total_connections"
	start := []string{"POST /healthcheck/fail", "POST /drain_listeners?graceful"}
	checks := func(n int) []string {
		out := slices.Clone(start)
		for range n {
			out = append(out, stats)
		}
		return out
	}
	tests := []struct {
		name                 string
		open                 []int
		minChecks, maxChecks int
		want                 []string
	}{
		{"no connection: waits the minimum", []int{0}, 3, 10, checks(3)},
		{"connections close: exits at the first check without any", []int{5, 2, 1, 0}, 1, 10, checks(4)},
		{"closed before the minimum: waits it", []int{1, 0}, 5, 10, checks(5)},
		{"never closed: gives up at the maximum", []int{7}, 1, 6, checks(6)},
		{"a connection opens again: keeps waiting", []int{0, 0, 3, 0}, 3, 10, checks(4)},
	}
	for _, chunked := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/chunked=%v", tt.name, chunked), func(t *testing.T) {
				admin := &fakeAdmin{open: tt.open, chunked: chunked}
				srv := httptest.NewServer(admin)
				defer srv.Close()
				runDrain(t, portOf(t, srv), tt.minChecks, tt.maxChecks)
				if got := admin.seen(); !slices.Equal(got, tt.want) {
					t.Errorf("requests:\n%q\nwant:\n%q", got, tt.want)
				}
			})
		}
	}
}

// When Envoy no longer answers (it crashed, or was never started), the
// script has nothing to drain and exits at once, successfully.
func TestDrainScriptWithoutEnvoy(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	port := portOf(t, srv)
	srv.Close() // nothing listens on port now
	runDrain(t, port, 5, 3600)

	// An admin interface that answers something else than 200 is not Envoy's.
	admin := &fakeAdmin{open: []int{0}}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		admin.ServeHTTP(httptest.NewRecorder(), r)
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	runDrain(t, portOf(t, broken), 5, 3600)
	if got := admin.seen(); len(got) != 3 {
		t.Errorf("requests %q: want the two POSTs and one check", got)
	}
}

// The hook a fleet's proxy gets: the script, on the admin port of the
// container's loopback, bounded by the drain time; none without a drain.
func TestDrainHook(t *testing.T) {
	if DrainHook(0) != nil || DrainArgs(0) != nil {
		t.Error("a drain of 0 seconds needs no hook and no arguments")
	}
	for _, tt := range []struct {
		seconds   int32
		minChecks int
	}{{60, MinDrainChecks}, {3, 3}} {
		h := DrainHook(tt.seconds)
		want := drainScript(drainParams{AdminPort: AdminPort, MinChecks: tt.minChecks, MaxChecks: int(tt.seconds), Interval: "1", Deadline: int(tt.seconds)})
		if h == nil || h.Exec == nil || !slices.Equal(h.Exec.Command, []string{"/bin/bash", "-c", want}) {
			t.Errorf("DrainHook(%d) = %+v", tt.seconds, h)
		}
		if got := DrainArgs(tt.seconds); !slices.Equal(got, []string{"--drain-time-s", strconv.Itoa(int(tt.seconds)), "--drain-strategy", "gradual"}) {
			t.Errorf("DrainArgs(%d) = %q", tt.seconds, got)
		}
	}
	// bash parses the script.
	if out, err := exec.Command("bash", "-n", "-c", DrainHook(60).Exec.Command[2]).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, out)
	}
}
