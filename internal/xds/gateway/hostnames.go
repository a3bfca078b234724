package gateway

import (
	"sort"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// anyHost is the virtual host of requests whose Host no other one names.
const anyHost = "*"

// wildcard reports whether h is a wildcard hostname, "*.example.com".
func wildcard(h string) bool { return strings.HasPrefix(h, "*.") }

// covers reports whether the wildcard w covers h, a hostname or a
// narrower wildcard: "*.example.com" covers "a.example.com",
// "a.b.example.com" and "*.b.example.com", not "example.com".
func covers(w, h string) bool {
	suffix := w[1:] // ".example.com"
	return strings.HasSuffix(h, suffix) && len(h) > len(suffix) && h != w
}

// intersect returns the hostnames that both a listener's hostname (none:
// any) and a route's hostnames (none: any) match, as the virtual hosts
// that serve the route there: anyHost when neither narrows them; empty
// when they have none in common.
func intersect(listener *gwv1.Hostname, route []gwv1.Hostname) []string {
	l := ""
	if listener != nil {
		l = string(*listener)
	}
	var out []string
	switch {
	case l == "" && len(route) == 0:
		out = []string{anyHost}
	case len(route) == 0:
		out = []string{l}
	default:
		for _, r := range route {
			if h := intersectOne(l, string(r)); h != "" {
				out = append(out, h)
			}
		}
	}
	return uniqueStrings(out)
}

// intersectOne returns the narrower of l and r when one matches the other.
func intersectOne(l, r string) string {
	switch {
	case l == "" || l == r:
		return r
	case wildcard(l) && covers(l, r):
		return r
	case wildcard(r) && covers(r, l):
		return l
	}
	return ""
}

func uniqueStrings(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// hostOrder sorts virtual hosts as they are written: hostnames first,
// then wildcards from the longest, anyHost last; each group
// alphabetically.
func hostOrder(hosts []string) {
	rank := func(h string) int {
		switch {
		case h == anyHost:
			return 2
		case wildcard(h):
			return 1
		}
		return 0
	}
	sort.Slice(hosts, func(i, j int) bool {
		a, b := hosts[i], hosts[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		if len(a) != len(b) && rank(a) == 1 {
			return len(a) > len(b)
		}
		return a < b
	})
}
