// Package vocabulary reads, from the source of a kind's API package, the
// condition types, condition reasons and event reasons it exports for that
// kind (the constants named <Kind>Condition*, <Kind>Reason* and
// <Kind>Event*), and checks what the operator set on an object against
// them. Clients match on those constants; a reason the operator sets must be
// one of them, or the API server's own reason for refusing a write (a
// metav1.StatusReason), which the API packages document as such.
//
// It is for tests only.
package vocabulary

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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// module is the path of the operator's Go module.
const module = "github.com/kube-envoy-controller/kube-envoy-controller"

// Vocabulary is what a kind's API package exports for it.
type Vocabulary struct {
	Kind string
	// Types, Reasons and Events are the values of the kind's condition
	// types, condition reasons and event reasons.
	Types, Reasons, Events map[string]bool
}

// apiServerReasons are the reasons the API server gives for refusing a
// write, which a Degraded condition carries as they are.
var apiServerReasons = map[metav1.StatusReason]bool{
	metav1.StatusReasonUnauthorized: true, metav1.StatusReasonForbidden: true, metav1.StatusReasonNotFound: true,
	metav1.StatusReasonAlreadyExists: true, metav1.StatusReasonConflict: true, metav1.StatusReasonGone: true,
	metav1.StatusReasonInvalid: true, metav1.StatusReasonServerTimeout: true, metav1.StatusReasonStoreReadError: true,
	metav1.StatusReasonTimeout: true, metav1.StatusReasonTooManyRequests: true, metav1.StatusReasonBadRequest: true,
	metav1.StatusReasonMethodNotAllowed: true, metav1.StatusReasonNotAcceptable: true,
	metav1.StatusReasonRequestEntityTooLarge: true, metav1.StatusReasonUnsupportedMediaType: true,
	metav1.StatusReasonInternalError: true, metav1.StatusReasonExpired: true, metav1.StatusReasonServiceUnavailable: true,
}

// Of returns the vocabulary of obj's kind (a pointer to a type of one of the
// operator's API packages), read from that package's source.
func Of(obj any) (Vocabulary, error) {
	typ := reflect.TypeOf(obj)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	rel, ok := strings.CutPrefix(typ.PkgPath(), module+"/")
	if !ok || !strings.HasPrefix(rel, "api/") {
		return Vocabulary{}, fmt.Errorf("%s is not a kind of the operator's API", typ)
	}
	root, err := moduleRoot()
	if err != nil {
		return Vocabulary{}, err
	}
	consts, err := constants(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return Vocabulary{}, err
	}
	v := Vocabulary{Kind: typ.Name(), Types: map[string]bool{}, Reasons: map[string]bool{}, Events: map[string]bool{}}
	for name, value := range consts {
		for infix, set := range map[string]map[string]bool{"Condition": v.Types, "Reason": v.Reasons, "Event": v.Events} {
			if rest, ok := strings.CutPrefix(name, v.Kind+infix); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
				set[value] = true
			}
		}
	}
	if len(v.Types) == 0 {
		return Vocabulary{}, fmt.Errorf("package %s exports no condition type of %s", rel, v.Kind)
	}
	return v, nil
}

// constants returns the string constants declared in the package in dir,
// by name: those given as a literal, or as another of them.
func constants(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	exprs := map[string]ast.Expr{}
	for _, entry := range entries {
		name := entry.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						exprs[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	var value func(e ast.Expr, depth int) (string, bool)
	value = func(e ast.Expr, depth int) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
		case *ast.Ident:
			if next, ok := exprs[e.Name]; ok && depth < 10 {
				return value(next, depth+1)
			}
		}
		return "", false
	}
	out := map[string]string{}
	for name, e := range exprs {
		if s, ok := value(e, 0); ok {
			out[name] = s
		}
	}
	return out, nil
}

// Conditions returns what is wrong with conds, set on an object of v's kind:
// a type or a reason the kind does not export.
func (v Vocabulary) Conditions(conds []metav1.Condition) []string {
	var wrong []string
	for _, c := range conds {
		if !v.Types[c.Type] {
			wrong = append(wrong, fmt.Sprintf("%s: condition type %q is not exported", v.Kind, c.Type))
		}
		if !v.Reasons[c.Reason] && !apiServerReasons[metav1.StatusReason(c.Reason)] {
			wrong = append(wrong, fmt.Sprintf("%s: reason %q of condition %s is not exported", v.Kind, c.Reason, c.Type))
		}
	}
	return wrong
}

// Event returns what is wrong with an event of reason recorded on an object
// of v's kind: an event reason, or the reason of the Degraded condition
// that a Warning event repeats, that the kind does not export.
func (v Vocabulary) Event(reason string) []string {
	if v.Events[reason] || v.Reasons[reason] || apiServerReasons[metav1.StatusReason(reason)] {
		return nil
	}
	return []string{fmt.Sprintf("%s: event reason %q is not exported", v.Kind, reason)}
}

// Check fails t for each condition of conds, set on obj, whose type or
// reason obj's kind does not export.
func Check(t testing.TB, obj any, conds []metav1.Condition) {
	t.Helper()
	v, err := Of(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Conditions(conds) {
		t.Error(w)
	}
}

// moduleRoot is the directory of the operator's module. A test runs in its
// package's directory, below it. (The source file's own path cannot say:
// builds with -trimpath, as make test's, name it by its import path.)
func moduleRoot() (string, error) {
	start, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := start; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == module {
					return dir, nil
				}
			}
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of module %s in %s or above", module, start)
		}
	}
}
