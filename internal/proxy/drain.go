package proxy

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// How a proxy that is being stopped drains. Envoy exits at once on SIGTERM,
// cutting every connection it holds; the kubelet sends SIGTERM only once the
// container's preStop hook has returned. DrainHook is that hook:
//
//  1. POST /healthcheck/fail: /ready answers 503, so that the readiness
//     probe and load balancers that probe it drop the proxy, and every
//     HTTP/1.1 response closes its connection (Connection: close), every
//     HTTP/2 connection is told to go away (GOAWAY).
//  2. POST /drain_listeners?graceful: the listeners keep accepting, for
//     clients that have not yet seen the endpoint go, and close after
//     --drain-time-s (DrainArgs).
//  3. Once a second, the connections still open (server.total_connections):
//     the hook returns when there are none, but not before MinDrainChecks
//     checks, so that the kube-proxies of every node and the load balancers
//     have stopped sending new ones, and at the latest after the drain time.
//     If the admin interface does not answer, Envoy is gone: the hook
//     returns at once.
//
// The admin interface stays on loopback: the hook runs in the proxy's own
// container, with bash's /dev/tcp, so the image needs bash and nothing else
// (the official envoyproxy/envoy images have it; the distroless ones do
// not, and their fleets set spec.drainSeconds: 0).

// MinDrainChecks is how many checks, a second apart, a draining proxy waits
// at least before it may exit with no connection left.
const MinDrainChecks = 10

// DrainStrategy is Envoy's --drain-strategy. Gradual, Envoy's default,
// spreads the closing of a listener changed by LDS over the drain time; a
// stopping proxy's connections close at once all the same, since its health
// check has failed.
const DrainStrategy = "gradual"

// DrainArgs are Envoy's arguments for a drain of seconds: none when seconds
// is 0, and Envoy keeps its defaults.
func DrainArgs(seconds int32) []string {
	if seconds <= 0 {
		return nil
	}
	return []string{"--drain-time-s", strconv.Itoa(int(seconds)), "--drain-strategy", DrainStrategy}
}

// DrainHook is the preStop hook of a proxy that drains for at most seconds,
// or nil when seconds is 0.
func DrainHook(seconds int32) *corev1.LifecycleHandler {
	if seconds <= 0 {
		return nil
	}
	script := drainScript(drainParams{
		AdminPort: AdminPort,
		MinChecks: min(MinDrainChecks, int(seconds)),
		MaxChecks: int(seconds),
		Interval:  "1",
		Deadline:  int(seconds),
	})
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/bash", "-c", script}}}
}

// drainParams are what the drain script is rendered with. Tests run it
// against a fake admin interface with a short interval.
type drainParams struct {
	AdminPort int
	// MinChecks and MaxChecks bound the checks of the open connections.
	MinChecks, MaxChecks int
	// Interval is the sleep between checks, as sleep(1) takes it.
	Interval string
	// Deadline is the wall-clock bound, in seconds since the hook started.
	Deadline int
}

// drainScript renders the drain sequence (see DrainHook) as a bash script.
// It always exits 0: a hook's failure only delays the SIGTERM that follows.
func drainScript(p drainParams) string {
	r := strings.NewReplacer(
		"ADMIN_PORT", strconv.Itoa(p.AdminPort),
		"MIN_CHECKS", strconv.Itoa(p.MinChecks),
		"MAX_CHECKS", strconv.Itoa(p.MaxChecks),
		"INTERVAL", p.Interval,
		"DEADLINE", strconv.Itoa(p.Deadline),
	)
	return r.Replace(drainTemplate)
}

// drainTemplate is the drain script. admin sends one request to Envoy's
// admin interface on loopback and prints the response's body; it fails
// when the interface does not answer 200 within 2 seconds.
const drainTemplate = `admin() {
  exec 3<>/dev/tcp/127.0.0.1/ADMIN_PORT || return 1
  printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' "$1" "$2" >&3
  local status line
  IFS= read -r -t 2 status <&3 || { exec 3<&-; return 1; }
  while IFS= read -r -t 2 line <&3 || [ -n "$line" ]; do printf '%s\n' "${line%$'\r'}"; done
  exec 3<&-
  case "$status" in "HTTP/1.1 200"*) return 0 ;; esac
  return 1
}
admin POST /healthcheck/fail >/dev/null
admin POST '/drain_listeners?graceful' >/dev/null
checks=0
while [ "$checks" -lt MAX_CHECKS ]; do
  checks=$((checks + 1))
  stats=$(admin GET '/stats?filter=server.total_connections') || break
  open=$(printf '%s\n' "$stats" | while IFS= read -r line; do case "$line" in "server.total_connections: "*) echo "${line#*: }" ;; esac; done)
  if [ "$checks" -ge MIN_CHECKS ] && [ "$open" = 0 ]; then break; fi
  if [ "$SECONDS" -ge DEADLINE ]; then break; fi
  sleep INTERVAL
done
exit 0
`
