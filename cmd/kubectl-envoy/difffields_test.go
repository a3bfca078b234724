package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func TestDiffFields(t *testing.T) {
	tests := []struct {
		name          string
		before, after string
		want          []string // "op path: old -> new"
	}{
		{"the same content, spaced and ordered differently", `{"a": 1, "b": {"c": [1, 2]}}`, `{"b":{"c":[1,2]},"a":1}`, nil},
		{"a scalar changes", `{"connect_timeout": "1s"}`, `{"connect_timeout": "2s"}`,
			[]string{`~ connect_timeout: "1s" -> "2s"`}},
		{"fields added and removed, at depth", `{"a": {"b": 1}}`, `{"a": {"c": {"d": true}}}`,
			[]string{`- a.b: 1`, `+ a.c: {"d":true}`}},
		{"lists without names, by index", `{"domains": ["a", "b"]}`, `{"domains": ["a", "c", "d"]}`,
			[]string{`~ domains[1]: "b" -> "c"`, `+ domains[2]: "d"`}},
		{"named elements, one inserted: one addition", `{"clusters": [{"name": "web", "weight": 90}, {"name": "canary", "weight": 10}]}`,
			`{"clusters": [{"name": "web", "weight": 80}, {"name": "blue", "weight": 10}, {"name": "canary", "weight": 10}]}`,
			[]string{`~ clusters[name=web].weight: 90 -> 80`, `+ clusters[name=blue]: {"name":"blue","weight":10}`}},
		{"named elements reordered: the whole list, since order matters", `{"http_filters": [{"name": "a"}, {"name": "b"}]}`,
			`{"http_filters": [{"name": "b"}, {"name": "a"}]}`,
			[]string{`~ http_filters: [{"name":"a"},{"name":"b"}] -> [{"name":"b"},{"name":"a"}]`}},
		{"names that repeat: by index", `{"l": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]}`, `{"l": [{"name": "a", "v": 1}, {"name": "a", "v": 3}]}`,
			[]string{`~ l[1].v: 2 -> 3`}},
		{"keys that are not field names", `{"typed_config": {"@type": "x.A"}, "m": {"envoy.filters.http.cors": {}}}`,
			`{"typed_config": {"@type": "x.B"}, "m": {}}`,
			[]string{`- m["envoy.filters.http.cors"]: {}`, `~ typed_config["@type"]: "x.A" -> "x.B"`}},
		{"a type changes", `{"a": {"b": 1}}`, `{"a": [1]}`, []string{`~ a: {"b":1} -> [1]`}},
		{"big numbers keep their digits, markup its characters", `{"n": 9007199254740993, "p": "<a&b>"}`, `{"n": 9007199254740995, "p": "<a&c>"}`,
			[]string{`~ n: 9007199254740993 -> 9007199254740995`, `~ p: "<a&b>" -> "<a&c>"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range diffFields(json.RawMessage(tt.before), json.RawMessage(tt.after)) {
				switch {
				case f.Old == nil:
					got = append(got, fmt.Sprintf("+ %s: %s", f.Path, f.New))
				case f.New == nil:
					got = append(got, fmt.Sprintf("- %s: %s", f.Path, f.Old))
				default:
					got = append(got, fmt.Sprintf("~ %s: %s -> %s", f.Path, f.Old, f.New))
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}
