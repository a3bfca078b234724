package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// apiPackage is the Go source of one API group version.
type apiPackage struct {
	group, version string
	types          map[string]*ast.TypeSpec
	// imports maps each file's import names to their paths, by type.
	imports map[string]map[string]string
}

// readAPIPackages parses the Go source of api/<group>/<version> under apiDir.
func readAPIPackages(apiDir string) ([]*apiPackage, error) {
	dirs, err := filepath.Glob(filepath.Join(apiDir, "*", "*"))
	if err != nil {
		return nil, err
	}
	var out []*apiPackage
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // a file, not a package
		}
		p := &apiPackage{version: filepath.Base(dir), types: map[string]*ast.TypeSpec{}, imports: map[string]map[string]string{}}
		fset := token.NewFileSet()
		for _, e := range entries {
			n := e.Name()
			if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			if f.Doc != nil {
				for _, l := range strings.Split(f.Doc.Text(), "\n") {
					if g, ok := strings.CutPrefix(l, "+groupName="); ok {
						p.group = g
					}
				}
			}
			imports := map[string]string{}
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				name := filepath.Base(path)
				if im.Name != nil {
					name = im.Name.Name
				}
				imports[name] = path
			}
			for _, d := range f.Decls {
				if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
					for _, s := range gd.Specs {
						ts := s.(*ast.TypeSpec)
						p.types[ts.Name.Name] = ts
						p.imports[ts.Name.Name] = imports
					}
				}
			}
		}
		if p.group != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// externalFields maps the JSON path of each field of a kind whose Go type
// is another module's (a Kubernetes type, such as a pod template) to that
// type, as import path.Name. The field reference lists such a field, not its
// own fields: the Kubernetes API reference does.
func externalFields(pkgs []*apiPackage, group, version, kind string) (map[string]string, error) {
	for _, p := range pkgs {
		if p.group != group || p.version != version {
			continue
		}
		if _, ok := p.types[kind]; !ok {
			return nil, fmt.Errorf("%s/%s: no Go type %s", group, version, kind)
		}
		out := map[string]string{}
		p.walk("", kind, out, map[string]bool{})
		return out, nil
	}
	return nil, fmt.Errorf("no Go package of %s/%s under api", group, version)
}

// walk records the external fields of a struct type, its fields at path.
func (p *apiPackage) walk(path, typeName string, out map[string]string, seen map[string]bool) {
	ts, ok := p.types[typeName]
	if !ok || seen[typeName] {
		return
	}
	seen[typeName] = true
	defer delete(seen, typeName)
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return
	}
	for _, f := range st.Fields.List {
		name, inline := "", len(f.Names) == 0
		if f.Tag != nil {
			tag, _ := strconv.Unquote(f.Tag.Value)
			j := reflect.StructTag(tag).Get("json")
			n, opts, _ := strings.Cut(j, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name, inline = n, false
			}
			if strings.Contains(","+opts+",", ",inline,") {
				inline = true
			}
		}
		if name == "" && !inline {
			name = f.Names[0].Name
		}
		fieldPath := path
		if !inline {
			fieldPath = join(path, name)
		}
		if path == "" && (name == "metadata" || name == "kind" || name == "apiVersion" || inline) && isExternal(f.Type) {
			continue // the object's own TypeMeta and ObjectMeta
		}
		t, suffix := f.Type, ""
		for {
			switch e := t.(type) {
			case *ast.StarExpr:
				t = e.X
				continue
			case *ast.ArrayType:
				t, suffix = e.Elt, suffix+"[]"
				continue
			case *ast.MapType:
				t, suffix = e.Value, suffix+".*"
				continue
			}
			break
		}
		switch e := t.(type) {
		case *ast.Ident:
			p.walk(fieldPath+suffix, e.Name, out, seen)
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && !inline {
				out[fieldPath] = p.imports[typeName][x.Name] + "." + e.Sel.Name
			}
		}
	}
}

func isExternal(t ast.Expr) bool {
	_, ok := t.(*ast.SelectorExpr)
	return ok
}
