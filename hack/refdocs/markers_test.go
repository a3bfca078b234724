package main

import (
	"strings"
	"testing"
)

func TestReplaceSection(t *testing.T) {
	const b, e = "<!-- BEGIN GENERATED: x -->", "<!-- END GENERATED: x -->"
	for _, tc := range []struct {
		name, page, body, want, err string
	}{
		{name: "replaces the old text", page: "a\n" + b + "\nold\nold\n" + e + "\nz\n", body: "new\n", want: "a\n" + b + "\nnew\n" + e + "\nz\n"},
		{name: "fills an empty section", page: b + "\n" + e + "\n", body: "new", want: b + "\nnew\n" + e + "\n"},
		{name: "empties a section", page: b + "\nold\n" + e + "\n", body: "", want: b + "\n\n" + e + "\n"},
		{name: "keeps other sections", page: b + "\nold\n" + e + "\n<!-- BEGIN GENERATED: y -->\nkeep\n<!-- END GENERATED: y -->\n", body: "new",
			want: b + "\nnew\n" + e + "\n<!-- BEGIN GENERATED: y -->\nkeep\n<!-- END GENERATED: y -->\n"},
		{name: "no markers", page: "a\n", err: "0 begin markers"},
		{name: "no end marker", page: b + "\nold\n", err: "0 end markers"},
		{name: "two sections of one name", page: b + "\n" + e + "\n" + b + "\n" + e + "\n", err: "2 begin markers"},
		{name: "end before begin", page: e + "\n" + b + "\n", err: "before the begin marker"},
	} {
		got, err := replaceSection(tc.page, "x", tc.body)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

func TestCells(t *testing.T) {
	if got := cell("a |\n  b"); got != `a \| b` {
		t.Errorf("cell: %q", got)
	}
	if got := code("x`y"); got != "`x'y`" {
		t.Errorf("code: %q", got)
	}
	if got := code(""); got != "" {
		t.Errorf("code of nothing: %q", got)
	}
}
