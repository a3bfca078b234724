package manifests

import (
	"strings"
	"testing"
)

const objects = `# a comment
apiVersion: v1
kind: Namespace
metadata:
  name: ns
---
apiVersion: v1
kind: Service
metadata:
  name: svc
  namespace: ns
spec:
  ports:
  - port: 80
    name: http
`

func TestSameObjectsInAnotherOrder(t *testing.T) {
	want, err := Parse([]byte(objects))
	if err != nil {
		t.Fatal(err)
	}
	// Other order of objects and keys, other quoting, an empty document.
	got, err := Parse([]byte(`---
kind: Service
apiVersion: "v1"
metadata: {namespace: ns, name: svc}
spec:
  ports:
  - name: http
    port: 80
---
# nothing
---
metadata:
  name: ns
apiVersion: v1
kind: Namespace
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(want, got); len(d) > 0 {
		t.Errorf("the same objects differ: %q", d)
	}
}

func TestDiff(t *testing.T) {
	want, err := Parse([]byte(objects))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse([]byte(`apiVersion: v1
kind: Service
metadata:
  name: svc
  namespace: ns
  labels: {a: b}
spec:
  ports:
  - port: "80"
---
apiVersion: v1
kind: Namespace
metadata:
  name: other
`))
	if err != nil {
		t.Fatal(err)
	}
	d := strings.Join(Diff(want, got), "\n")
	for _, s := range []string{
		"missing: Namespace ns (v1)",
		"unexpected: Namespace other (v1)",
		"Service ns/svc (v1): .metadata.labels: unexpected map[a:b]",
		"Service ns/svc (v1): .spec.ports[0].port: \"80\", want 80", // a string, not a number
		"Service ns/svc (v1): .spec.ports[0].name: missing, want \"http\"",
	} {
		if !strings.Contains(d, s) {
			t.Errorf("the diff does not say %q:\n%s", s, d)
		}
	}
}

func TestParseRefusesTheSameObjectTwice(t *testing.T) {
	if _, err := Parse([]byte(objects + "---\n" + objects)); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("Parse = %v, want an error: an object twice", err)
	}
}
