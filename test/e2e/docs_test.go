//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-envoy-controller/kube-envoy-controller/test/framework"
)

// The docs' shell blocks run here as written, against the suite's cluster,
// and what they print is checked. Every ```sh, ```bash, ```shell and
// ```console block of a page below is marked, by an HTML comment on the
// line before it (markdown shows no comment, so readers see the block
// alone):
//
//	<!-- test: skip: why -->   not run: it only makes sense on a developer's
//	                           machine (make run, git clone); why is for the
//	                           doc's maintainers.
//	<!-- test: run -->         run with bash, after the blocks above it.
//	<!-- test: run
//	contains: TEXT             and its output (stdout and stderr) holds TEXT,
//	matches: REGEXP            and its output matches REGEXP (Go syntax, ^ and
//	-->                        $ at each line's ends); as many as needed.
//
// A ```console block's commands are its lines that start with "$ " (a line
// that ends with \ goes on on the next); its other lines are what the doc
// shows they print, for readers. A block's commands run in bash with -e and
// pipefail, in a directory that stands for the repository's root as make
// run leaves it (makeRun), and with the variables the blocks above it
// exported, as in one terminal; nothing else of the suite's environment
// reaches them but the host's PATH: they find the cluster and bin/ as the
// quickstart tells its reader to. A block runs again until it succeeds and its
// output passes the checks (what it shows, the operator and the proxies
// reach in their own time), so blocks that change something are written to
// be run twice (kubectl apply, not create).

// docPages are the pages whose blocks run, each with what a reader has
// done before its first block: make run, in a namespace of the page's own
// (its name, and a random suffix), then what setup, when there is one, does
// for the page (what its reader is taken to have, such as a certificate to
// serve), and in the terminal, for a task page, what the quickstart says to
// type.
var docPages = []struct {
	path, namespace string
	terminal        string
	setup           func(t *testing.T, root string)
}{
	{"docs/quickstart.md", "e2e-docs-quickstart", "", nil},
	{"docs/tasks/routing-and-canary.md", "e2e-docs-routing", quickstartTerminal, nil},
	// The README shows, in short, what the quickstart does; its reader puts
	// bin/ on PATH as the quickstart says.
	{"README.md", "e2e-docs-readme", quickstartTerminal, nil},
	// Its reader has a certificate and its key for web.example.com, the
	// TLS sample's host, in tls.crt and tls.key: a new one, which the
	// sample's proxies do not serve yet.
	{"docs/tasks/tls.md", "e2e-docs-tls", quickstartTerminal, func(t *testing.T, root string) {
		tlsCert(t, root, "web.example.com")
	}},
	// Its namespace shop is there, without the label.
	{"docs/tasks/sidecar-injection.md", "e2e-docs-sidecar", quickstartTerminal, func(t *testing.T, _ string) {
		namespace(t, "shop")
	}},
	{"docs/tasks/proxyless-grpc.md", "e2e-docs-grpc", quickstartTerminal, nil},
	{"docs/tasks/production-fleets.md", "e2e-docs-production", quickstartTerminal, nil},
	{"docs/tasks/previewing-changes.md", "e2e-docs-previewing", quickstartTerminal, nil},
	{"docs/tasks/rolling-out-a-change.md", "e2e-docs-rolling-out", quickstartTerminal, nil},
	// The namespace of kube-prometheus-stack, monitoring, is there; its
	// Grafana and Prometheus are not.
	{"docs/tasks/monitoring.md", "e2e-docs-monitoring", quickstartTerminal, func(t *testing.T, _ string) {
		namespace(t, "monitoring")
	}},
}

// quickstartTerminal is what the quickstart has its reader export, as it
// says it.
const quickstartTerminal = "export KUBECONFIG=$PWD/tmp/kec-dev/kubeconfig PATH=$PWD/bin:$PATH"

// docBlock is one fenced shell block of a page.
type docBlock struct {
	line     int    // of the opening fence, 1-based
	lang     string // sh, bash, shell or console
	script   string // what bash runs
	skip     string // why it does not run; empty when it runs
	contains []string
	matches  []*regexp.Regexp
}

// shellLangs are the fence languages whose blocks must be marked.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// docBlocks returns the shell blocks of the markdown content, with their
// marks; an unmarked shell block, a mark that no block follows or a mark
// it does not understand is an error.
func docBlocks(content string) ([]docBlock, error) {
	var (
		out     []docBlock
		pending *docBlock // the mark read, until its block
		lines   = strings.Split(content, "\n")
	)
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(line, "<!-- test:"):
			if pending != nil {
				return nil, fmt.Errorf("line %d: a test mark, and no block after the one of line %d", i+1, pending.line)
			}
			body := strings.TrimPrefix(line, "<!-- test:")
			for !strings.HasSuffix(strings.TrimSpace(body), "-->") {
				if i++; i == len(lines) {
					return nil, fmt.Errorf("a test mark that does not end (no -->)")
				}
				body += "\n" + lines[i]
			}
			b, err := parseMark(strings.TrimSuffix(strings.TrimSpace(body), "-->"))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			pending = &b
			pending.line = i + 1
		case strings.HasPrefix(line, "```"):
			lang := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			start := i
			var body []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				body = append(body, lines[i])
			}
			if i == len(lines) {
				return nil, fmt.Errorf("line %d: a block that does not end", start+1)
			}
			if !shellLangs[lang] {
				if pending != nil {
					return nil, fmt.Errorf("line %d: a test mark before a %q block, which is no shell block", start+1, lang)
				}
				continue
			}
			if pending == nil {
				return nil, fmt.Errorf("line %d: a %s block without a test mark (<!-- test: run --> or <!-- test: skip: why -->)", start+1, lang)
			}
			b := *pending
			pending = nil
			b.line, b.lang = start+1, lang
			if b.script = strings.Join(body, "\n"); lang == "console" {
				b.script = consoleCommands(body)
			}
			if b.skip == "" && strings.TrimSpace(b.script) == "" {
				return nil, fmt.Errorf("line %d: a block to run without a command", start+1)
			}
			out = append(out, b)
		case line != "" && pending != nil:
			return nil, fmt.Errorf("line %d: text between the test mark of line %d and its block", i+1, pending.line)
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("line %d: a test mark, and no block after it", pending.line)
	}
	return out, nil
}

// parseMark reads a mark's text, after "test:".
func parseMark(text string) (docBlock, error) {
	var b docBlock
	lines := strings.Split(strings.TrimSpace(text), "\n")
	switch first := strings.TrimSpace(lines[0]); {
	case strings.HasPrefix(first, "skip:"):
		if b.skip = strings.TrimSpace(strings.TrimPrefix(first, "skip:")); b.skip == "" || len(lines) > 1 {
			return b, fmt.Errorf("a skip mark wants its reason, and nothing else")
		}
		return b, nil
	case first != "run":
		return b, fmt.Errorf("a test mark says run or skip: why, not %q", first)
	}
	for _, l := range lines[1:] {
		key, value, ok := strings.Cut(strings.TrimSpace(l), ": ")
		switch {
		case strings.TrimSpace(l) == "":
		case ok && key == "contains":
			b.contains = append(b.contains, value)
		case ok && key == "matches":
			re, err := regexp.Compile("(?m)" + value)
			if err != nil {
				return b, err
			}
			b.matches = append(b.matches, re)
		default:
			return b, fmt.Errorf("a check is contains: TEXT or matches: REGEXP, not %q", l)
		}
	}
	return b, nil
}

// consoleCommands returns the commands of a console block's lines.
func consoleCommands(lines []string) string {
	var cmds []string
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "$ ")
		if !ok {
			continue
		}
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd += "\n" + lines[i]
		}
		cmds = append(cmds, cmd)
	}
	return strings.Join(cmds, "\n")
}

// check returns what output lacks of what b checks.
func (b docBlock) check(output string) error {
	var missing []string
	for _, s := range b.contains {
		if !strings.Contains(output, s) {
			missing = append(missing, fmt.Sprintf("contains %q", s))
		}
	}
	for _, re := range b.matches {
		if !re.MatchString(output) {
			missing = append(missing, "matches "+strings.TrimPrefix(re.String(), "(?m)"))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the output does not pass %s:\n%s", strings.Join(missing, ", "), output)
	}
	return nil
}

// The marks are read as the comment above says.
func TestDocsMarks(t *testing.T) {
	blocks, err := docBlocks("# Page\n\n<!-- test: skip: on a developer's machine -->\n```sh\nmake run\n```\n\n" +
		"```text\nnot a shell block\n```\n\n<!-- test: run\ncontains: canary\nmatches: ^ +\\d+ stable$\n-->\n```console\n" +
		"$ for i in 1 2; do \\\n  echo $i; done\n1\n2\n$ echo done\ndone\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].skip != "on a developer's machine" || blocks[1].skip != "" ||
		blocks[1].script != "for i in 1 2; do \\\n  echo $i; done\necho done" ||
		len(blocks[1].contains) != 1 || len(blocks[1].matches) != 1 || blocks[1].line != 16 {
		t.Fatalf("blocks: %+v", blocks)
	}
	if err := blocks[1].check("     7 stable\n     1 canary\n"); err != nil {
		t.Error(err)
	}
	if err := blocks[1].check("7 stable\ncanary"); err == nil || !strings.Contains(err.Error(), `matches ^ +\d+ stable$`) {
		t.Errorf("a line that does not match: %v", err)
	}
	for content, want := range map[string]string{
		"```sh\nls\n```\n":                           "without a test mark",
		"<!-- test: run -->\nsome text\n```sh\n```":  "text between",
		"<!-- test: skip: -->\n```sh\nls\n```\n":     "wants its reason",
		"<!-- test: maybe -->\n```sh\nls\n```\n":     "run or skip",
		"<!-- test: run -->\n```text\nls\n```\n":     "no shell block",
		"<!-- test: run\nequals: x\n-->\n```sh\n```": "a check is",
		"<!-- test: run -->\n```console\nout\n```\n": "without a command",
		"<!-- test: run -->\n":                       "no block after it",
	} {
		if _, err := docBlocks(content); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("docBlocks(%q): %v, want %q", content, err, want)
		}
	}
}

// Each page's shell blocks, in order, in a namespace of their own.
func TestDocs(t *testing.T) {
	for _, page := range docPages {
		t.Run(filepath.Base(page.path), func(t *testing.T) {
			content, err := os.ReadFile(filepath.Join(os.Getenv("E2E_ROOT"), page.path))
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := docBlocks(string(content))
			if err != nil {
				t.Fatalf("%s: %v", page.path, err)
			}
			root := t.TempDir()
			makeRun(t, root, page.namespace)
			if page.setup != nil {
				page.setup(t, root)
			}
			sh := newDocShell(t, root)
			if page.terminal != "" {
				quickstart, err := os.ReadFile(filepath.Join(os.Getenv("E2E_ROOT"), "docs", "quickstart.md"))
				if err != nil || !strings.Contains(string(quickstart), "\n"+page.terminal+"\n") {
					t.Fatalf("the quickstart does not say %q (%v)", page.terminal, err)
				}
				if out, err := sh.run(page.terminal); err != nil {
					t.Fatalf("%s: %v\n%s", page.terminal, err, out)
				}
			}
			for _, b := range blocks {
				where := fmt.Sprintf("%s:%d", page.path, b.line)
				if b.skip != "" {
					t.Logf("%s: not run: %s", where, b.skip)
					continue
				}
				var output string
				start, tries := time.Now(), 0
				framework.Eventually(t, 3*time.Minute, where+" to run, with the output it shows", func() (bool, error) {
					var err error
					tries++
					if output, err = sh.run(b.script); err != nil {
						return false, fmt.Errorf("%v:\n%s", err, output)
					}
					err = b.check(output)
					return err == nil, err
				})
				t.Logf("%s: ran in %s (%d tries)\n%s\nand printed\n%s", where, time.Since(start).Round(100*time.Millisecond), tries,
					indent("    ", b.script), indent("    ", output))
			}
		})
	}
}

func indent(prefix, s string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(strings.TrimRight(s, "\n")))
	for sc.Scan() {
		out = append(out, prefix+sc.Text())
	}
	return strings.Join(out, "\n")
}

// docShell runs blocks as in one terminal: each in bash, in dir, with the
// variables that the blocks before it exported.
type docShell struct {
	dir, state string
	env        []string
}

func newDocShell(t *testing.T, dir string) *docShell {
	t.Helper()
	home := t.TempDir()
	state := filepath.Join(t.TempDir(), "exported")
	if err := os.WriteFile(state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The host's PATH, and a home of its own: no kubeconfig but the one
	// the doc says.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb"}
	return &docShell{dir: dir, state: state, env: env}
}

// run runs script and returns what it printed. The variables it exports
// are kept only when it succeeds.
func (s *docShell) run(script string) (string, error) {
	next := s.state + ".next"
	wrapped := fmt.Sprintf("source %q\ncd %q\ntrap 'export -p >%q' EXIT\nset -eo pipefail\n%s\n", s.state, s.dir, next, script)
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", wrapped)
	cmd.Dir, cmd.Env = s.dir, s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), err
	}
	return string(out), os.Rename(next, s.state)
}

// makeRun does in root what make run does beside
// starting the cluster and the operator, which hack/e2e.sh has started:
// root stands for the repository's root, with bin/ (kubectl, and
// kubectl-envoy built from this tree), config/, and tmp/kec-dev/ with the
// cluster's kubeconfig, whose namespace is the test's own, where the
// samples go, the TLS sample's certificate, and the admin address of each
// of the gateway's Envoys, which run on this host.
func makeRun(t *testing.T, root, ns string) {
	t.Helper()
	requirePodNet(t)
	repo := os.Getenv("E2E_ROOT")
	// Of the run's own: the last run's may still be going.
	ns = namespace(t, fmt.Sprintf("%s-%04x", ns, rand.IntN(1<<16)))
	dev := filepath.Join(root, "tmp", "kec-dev")
	if err := os.MkdirAll(filepath.Join(dev, "proxies"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"bin/kubectl":       filepath.Join(repo, "bin", "kubectl"),
		"bin/kubectl-envoy": build(t, "./cmd/kubectl-envoy"),
		"config":            filepath.Join(repo, "config"),
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := clientcmd.LoadFromFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	kc.Contexts[kc.CurrentContext].Namespace = ns
	if err := clientcmd.WriteToFile(*kc, filepath.Join(dev, "kubeconfig")); err != nil {
		t.Fatal(err)
	}

	// The TLS sample's Secret, made as make run makes it.
	tlsDir := filepath.Join(dev, "web-tls")
	tlsCert(t, tlsDir, "web.example.com")
	kubectl.Run(t, "-n", ns, "create", "secret", "tls", "web-tls", "--cert", filepath.Join(tlsDir, "tls.crt"), "--key", filepath.Join(tlsDir, "tls.key"))
	kubectl.Run(t, "-n", ns, "label", "secret", "web-tls", "kube-envoy-controller.io/xds-secret=tls")
	kubectl.Run(t, "label", "namespace", ns, "kube-envoy-controller.io/injection=enabled")
	kubectl.Run(t, "-n", ns, "apply", "-f", filepath.Join(repo, "config", "samples"))

	// The gateway's proxies, real Envoys on this host, and their admin
	// addresses where make run writes them.
	k := runEnvoys(t, ns, "web-gateway", false)
	for pod, p := range k.WaitLive(t, 2, 2*time.Minute) {
		if err := os.WriteFile(filepath.Join(dev, "proxies", pod+".admin"), []byte(p.Admin+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// tlsCert writes a self-signed certificate for host and its key, as tls.crt
// and tls.key in dir, with hack/tlscert, as make run does.
func tlsCert(t *testing.T, dir, host string) {
	t.Helper()
	cmd := exec.Command("go", "run", "./hack/tlscert", dir, host)
	cmd.Dir = os.Getenv("E2E_ROOT")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/tlscert: %v: %s", err, out)
	}
}
