package certificates

import (
	"net/http"
	"net/url"
	"testing"
)

func TestCollectionPath(t *testing.T) {
	for _, tc := range []struct{ group, version, namespace, resource, want string }{
		{"", "v1", "kube-envoy-controller", "secrets", "/api/v1/namespaces/kube-envoy-controller/secrets"},
		{"admissionregistration.k8s.io", "v1", "", "mutatingwebhookconfigurations", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"},
	} {
		if got := collectionPath(tc.group, tc.version, tc.namespace, tc.resource); got != tc.want {
			t.Errorf("%+v: got %s", tc, got)
		}
	}
}

func TestWithNameSelector(t *testing.T) {
	names := map[string]string{"/api/v1/namespaces/ns/secrets": "cert"}
	for _, tc := range []struct {
		name, method, path, query string
		want                      string // fieldSelector after; "" means the request is left alone
	}{
		{name: "list", method: http.MethodGet, path: "/api/v1/namespaces/ns/secrets", query: "limit=500&resourceVersion=0", want: "metadata.name=cert"},
		{name: "watch", method: http.MethodGet, path: "/api/v1/namespaces/ns/secrets", query: "watch=true&allowWatchBookmarks=true", want: "metadata.name=cert"},
		{name: "selector kept", method: http.MethodGet, path: "/api/v1/namespaces/ns/secrets", query: "fieldSelector=type%3DOpaque", want: "type=Opaque,metadata.name=cert"},
		{name: "another collection", method: http.MethodGet, path: "/api/v1/namespaces/other/secrets"},
		{name: "one object", method: http.MethodGet, path: "/api/v1/namespaces/ns/secrets/cert"},
		{name: "a write", method: http.MethodPost, path: "/api/v1/namespaces/ns/secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := withNameSelector(tc.method, tc.path, tc.query, names)
			if !ok {
				if tc.want != "" {
					t.Fatalf("left alone, want fieldSelector %q", tc.want)
				}
				return
			}
			if tc.want == "" {
				t.Fatalf("changed to %q, want it left alone", q)
			}
			v, err := url.ParseQuery(q)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Get("fieldSelector"); got != tc.want {
				t.Errorf("fieldSelector %q, want %q", got, tc.want)
			}
			old, _ := url.ParseQuery(tc.query)
			for k := range old {
				if k != "fieldSelector" && v.Get(k) != old.Get(k) {
					t.Errorf("%s changed from %q to %q", k, old.Get(k), v.Get(k))
				}
			}
		})
	}
}
