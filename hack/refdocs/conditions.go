package main

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// constant is one exported condition type, condition reason or event
// reason of an API package.
type constant struct {
	Name, Value, Doc string
}

// kindConstants are a kind's constants, by what they name.
type kindConstants struct {
	Kind, GroupVersion, File          string
	Conditions, Reasons, EventReasons []constant
}

// The constants' names: <Kind>Condition<Type>, <Kind>Reason<Reason> and
// <Kind>Event<Reason>.
var constantName = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*?)(Condition|Reason|Event)[A-Z][A-Za-z0-9]*$`)

// apiConditions reads the constants of api/<group>/<version>/conditions.go
// under apiDir, by kind: the kinds are the package's root types (marked
// +kubebuilder:object:root=true, but for lists), the group its +groupName.
func apiConditions(apiDir string) ([]kindConstants, error) {
	files, err := filepath.Glob(filepath.Join(apiDir, "*", "*", "conditions.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no %s", filepath.Join(apiDir, "*", "*", "conditions.go"))
	}
	var out []kindConstants
	for _, f := range files {
		kinds, err := packageConditions(filepath.Dir(f))
		if err != nil {
			return nil, err
		}
		out = append(out, kinds...)
	}
	return out, nil
}

// packageConditions reads the constants of one API package's conditions.go.
func packageConditions(dir string) ([]kindConstants, error) {
	fset := token.NewFileSet()
	pkgFiles := map[string]*ast.File{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		pkgFiles[n] = f
	}
	cond, ok := pkgFiles["conditions.go"]
	if !ok {
		return nil, fmt.Errorf("%s: no conditions.go", dir)
	}
	group := ""
	var kinds []string
	for _, f := range pkgFiles {
		if f.Doc != nil {
			for _, l := range strings.Split(f.Doc.Text(), "\n") {
				if g, ok := strings.CutPrefix(l, "+groupName="); ok {
					group = g
				}
			}
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if strings.Contains(markers(fset, f, gd, ts), "+kubebuilder:object:root=true") && !strings.HasSuffix(ts.Name.Name, "List") {
					kinds = append(kinds, ts.Name.Name)
				}
			}
		}
	}
	if group == "" {
		return nil, fmt.Errorf("%s: no +groupName", dir)
	}
	gv := group + "/" + filepath.Base(dir)
	return kindsOf(cond, kinds, gv, filepath.ToSlash(filepath.Join(dir, "conditions.go")))
}

// markers is the text of the comments a type's markers may be in, as
// controller-gen reads them: its doc comment, and the comment group that
// ends on the line before the doc comment, or the one before that (a group
// of markers, a blank line, then the doc comment).
func markers(fset *token.FileSet, f *ast.File, gd *ast.GenDecl, ts *ast.TypeSpec) string {
	doc := ts.Doc
	if doc == nil && len(gd.Specs) == 1 {
		doc = gd.Doc
	}
	start := ts.Pos()
	if doc != nil {
		start = doc.Pos()
	} else if len(gd.Specs) == 1 {
		start = gd.Pos()
	}
	line := fset.Position(start).Line
	var b strings.Builder
	for _, g := range f.Comments {
		end := fset.Position(g.End()).Line
		if g == doc || end == line-1 || end == line-2 {
			for _, c := range g.List {
				b.WriteString(c.Text + "\n")
			}
		}
	}
	return b.String()
}

// kindsOf sorts the exported constants of a conditions.go into the kinds
// whose names prefix theirs (the longest such kind), and fails on one that
// belongs to no kind.
func kindsOf(f *ast.File, kinds []string, gv, where string) ([]kindConstants, error) {
	// The longest kind first, so that EnvoyConfig's constants are not Envoy's.
	slices.SortFunc(kinds, func(a, b string) int { return len(b) - len(a) })
	byKind := map[string]*kindConstants{}
	values := map[string]string{}
	type pending struct {
		name string
		expr ast.Expr
		doc  string
	}
	var all []pending
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		// A constant without a comment of its own shares that of the
		// constant before it, when that one names it, else its block's.
		prev := ""
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				text := ""
				if vs.Doc != nil {
					text = vs.Doc.Text()
				} else if strings.Contains(prev, n.Name) {
					text = prev
				} else if gd.Doc != nil {
					text = gd.Doc.Text()
				}
				prev = text
				if i < len(vs.Values) {
					all = append(all, pending{n.Name, vs.Values[i], text})
				}
			}
		}
	}
	for _, p := range all {
		if lit, ok := p.expr.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return nil, err
			}
			values[p.name] = v
		}
	}
	for _, p := range all {
		if id, ok := p.expr.(*ast.Ident); ok {
			if v, ok := values[id.Name]; ok {
				values[p.name] = v
			}
		}
	}
	var order []string
	for _, p := range all {
		if !ast.IsExported(p.name) {
			continue
		}
		v, ok := values[p.name]
		if !ok {
			return nil, fmt.Errorf("%s: %s: not a string constant, nor one naming another", where, p.name)
		}
		m := constantName.FindStringSubmatch(p.name)
		kind := ""
		for _, k := range kinds {
			if m != nil && strings.HasPrefix(p.name, k+m[2]) {
				kind = k
				break
			}
		}
		if kind == "" {
			return nil, fmt.Errorf("%s: %s is not <Kind>Condition…, <Kind>Reason… or <Kind>Event… of a kind of the package (%s)", where, p.name, strings.Join(kinds, ", "))
		}
		// The kind's prefix decides what the constant names.
		what := strings.TrimPrefix(p.name, kind)
		kc := byKind[kind]
		if kc == nil {
			kc = &kindConstants{Kind: kind, GroupVersion: gv, File: where}
			byKind[kind] = kc
			order = append(order, kind)
		}
		c := constant{Name: p.name, Value: v, Doc: docText(p.doc)}
		switch {
		case strings.HasPrefix(what, "Condition"):
			kc.Conditions = append(kc.Conditions, c)
		case strings.HasPrefix(what, "Reason"):
			kc.Reasons = append(kc.Reasons, c)
		default:
			kc.EventReasons = append(kc.EventReasons, c)
		}
	}
	out := make([]kindConstants, 0, len(order))
	for _, k := range order {
		out = append(out, *byKind[k])
	}
	return out, nil
}

// docText is a doc comment as one paragraph of plain text.
func docText(text string) string {
	var p comment.Parser
	pr := comment.Printer{TextWidth: -1}
	return strings.Join(strings.Fields(string(pr.Text(p.Parse(text)))), " ")
}

// conditionsReference renders the constants, one section per kind.
func conditionsReference(kinds []kindConstants) string {
	var b strings.Builder
	for i, k := range kinds {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n%s, in %s:\n", k.Kind, code(k.GroupVersion), code(k.File))
		for _, part := range []struct {
			title string
			cs    []constant
		}{
			{"Condition types", k.Conditions},
			{"Condition reasons", k.Reasons},
			{"Event reasons", k.EventReasons},
		} {
			if len(part.cs) == 0 {
				continue
			}
			var rows [][]string
			for _, c := range part.cs {
				rows = append(rows, []string{code(c.Value), code(c.Name), cell(c.Doc)})
			}
			fmt.Fprintf(&b, "\n%s:\n\n%s", part.title, table([]string{"value", "constant", "when"}, rows))
		}
	}
	return b.String()
}
