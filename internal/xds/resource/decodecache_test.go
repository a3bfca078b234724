package resource

import (
	"errors"
	"fmt"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// The cache decodes each content once while it is in use, tells kinds apart,
// remembers errors too, and holds at most two generations.
func TestDecodeCache(t *testing.T) {
	c := newDecodeCache(2, 1<<20)
	calls := map[string]int{}
	decode := func(k Kind, raw []byte) (types.Resource, string, error) {
		calls[k.Field+" "+string(raw)]++
		if string(raw) == "bad" {
			return nil, "", errors.New("bad resource")
		}
		return nil, k.Field + ":" + string(raw), nil
	}
	get := func(k Kind, raw string) string {
		_, name, err := c.get(k, []byte(raw), decode)
		if err != nil {
			return err.Error()
		}
		return name
	}
	clusters, listeners := KindOf("type.googleapis.com/envoy.config.cluster.v3.Cluster"), KindOf("type.googleapis.com/envoy.config.listener.v3.Listener")
	for range 3 {
		if got := get(clusters, "a"); got != "clusters:a" {
			t.Fatalf("got %q", got)
		}
	}
	if got := get(listeners, "a"); got != "listeners:a" {
		t.Fatalf("the same bytes of another kind: got %q", got)
	}
	if got := get(clusters, "bad"); got != "bad resource" {
		t.Fatalf("got %q", got)
	}
	_ = get(clusters, "bad")
	want := map[string]int{"clusters a": 1, "listeners a": 1, "clusters bad": 1}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("decoded %v, want each once: %v", calls, want)
	}
	// Ten other contents push the first ones out of both generations.
	for i := range 10 {
		_ = get(clusters, fmt.Sprint("other-", i))
	}
	_ = get(clusters, "a")
	if calls["clusters a"] != 2 {
		t.Errorf("clusters a decoded %d times, want 2: it left the cache", calls["clusters a"])
	}
	if n, _ := c.results.Held(); n > 4 {
		t.Errorf("the cache holds %d results, want at most 2×2", n)
	}
}

// The cache holds at most twice its bytes of input, and nothing larger.
func TestDecodeCacheBytes(t *testing.T) {
	c := newDecodeCache(1000, 100)
	decode := func(Kind, []byte) (types.Resource, string, error) { return nil, "", nil }
	clusters := KindOf("type.googleapis.com/envoy.config.cluster.v3.Cluster")
	for i := range 50 {
		_, _, _ = c.get(clusters, []byte(fmt.Sprintf("%030d", i)), decode)
		if _, held := c.results.Held(); held > 200 {
			t.Fatalf("after %d resources of 30 bytes the cache holds %d bytes, want at most 2×100", i+1, held)
		}
	}
	_, _, _ = c.get(clusters, make([]byte, 101), decode)
	if most := c.results.Heaviest(); most > 100 {
		t.Fatalf("a resource of %d bytes is held, more than a generation's 100", most)
	}
}
