// Package docs checks the project's Markdown: every relative link leads to
// a file of the repository, and every #anchor to a heading of its page, as
// GitHub renders them.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// link is a Markdown link or image: [text](target) or ![alt](target), the
// target without a title.
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// heading is an ATX heading.
var heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// headingMarkup is the inline code and links of a heading, which keep only
// their text in its anchor; code is the inline code spans of a line.
var (
	headingMarkup = regexp.MustCompile("`|\\[([^\\]]*)\\]\\([^)]*\\)")
	code          = regexp.MustCompile("`[^`]*`")
)

// slug is GitHub's anchor of a heading: lower case, without the
// punctuation GitHub drops, spaces as hyphens.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// page is what a Markdown file offers links: its anchors (a repeated
// heading's gets -1, -2, ...), and its relative links with their lines.
type page struct {
	anchors map[string]bool
	links   []struct {
		line   int
		target string
	}
}

func read(t *testing.T, path string) page {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := slug(headingMarkup.ReplaceAllString(m[1], "$1"))
			if k := seen[a]; k > 0 {
				p.anchors[a+"-"+itoa(k)] = true
			} else {
				p.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(line), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p.links = append(p.links, struct {
				line   int
				target string
			}{n, target})
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return p
}

// stripCode drops a line's inline code spans, which hold no links.
func stripCode(line string) string {
	return code.ReplaceAllString(line, "")
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// Every relative link of every Markdown file of the repository leads to a
// file that exists, and its anchor, if any, to a heading of that file.
func TestLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "tmp" || name == "bin" || name == "dist" || name == "node_modules" || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d Markdown files under %s; the walk is wrong", len(files), root)
	}
	pages := map[string]page{}
	get := func(path string) page {
		p, ok := pages[path]
		if !ok {
			p = read(t, path)
			pages[path] = p
		}
		return p
	}
	checked := 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		for _, l := range get(file).links {
			target, anchor, _ := strings.Cut(l.target, "#")
			dest := file
			if target != "" {
				dest = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: %s leads to no file", rel, l.line, l.target)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !get(dest).anchors[anchor] {
				t.Errorf("%s:%d: %s: no heading of %s has the anchor #%s", rel, l.line, l.target, filepath.Base(dest), anchor)
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d relative links checked; the link pattern is wrong", checked)
	}
}
