package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kube-envoy-controller/kube-envoy-controller/internal/xds/debug"
)

var (
	now  = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rows = []debug.ProxyRow{
		{Node: "edge-2", Fleet: "team/edge", Replica: "op-1", LastSeen: now.Add(-90 * time.Second), State: debug.NACKed,
			NACK: "cluster backend:\n  bad value " + strings.Repeat("x", 80),
			Types: []debug.TypeStatus{
				{Type: "listeners", Current: "aaaaaaaa11111111", Sent: "aaaaaaaa11111111", Acked: "aaaaaaaa11111111", State: debug.Synced},
				{Type: "clusters", Current: "cccccccc22222222", Sent: "cccccccc22222222", Acked: "cccccccc11111111", State: debug.NACKed,
					NACKVersion: "cccccccc22222222", NACK: "cluster backend: bad value"},
			}},
		{Node: "edge-1", Fleet: "team/edge", Replica: "op-0", LastSeen: now.Add(-5 * time.Second), State: debug.Stale,
			Types: []debug.TypeStatus{{Type: "listeners", Current: "aaaaaaaa11111111", Sent: "aaaaaaaa11111111", State: debug.Stale}}},
	}
)

func TestPrintRowsTable(t *testing.T) {
	rs := append([]debug.ProxyRow(nil), rows...)
	sortRows(rs)
	var b bytes.Buffer
	if err := printRows(&b, outputTable, rs, now); err != nil {
		t.Fatal(err)
	}
	want := `NODE     FLEET       REPLICA   LDS SENT/ACKED       RDS SENT/ACKED   CDS SENT/ACKED               EDS SENT/ACKED   SDS SENT/ACKED   STATE    NACK                                                           LAST SEEN
edge-1   team/edge   op-0      aaaaaaaa/- (STALE)   -                -                            -                -                STALE    -                                                              5s ago
edge-2   team/edge   op-1      aaaaaaaa/aaaaaaaa    -                cccccccc/cccccccc (NACKED)   -                -                NACKED   cluster backend: bad value xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…   90s ago
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	b.Reset()
	if err := printRows(&b, outputTable, nil, now); err != nil || b.String() != "No proxies found.\n" {
		t.Errorf("no rows: %q, %v", b.String(), err)
	}
	if err := printRows(&b, "wide", rs, now); err == nil {
		t.Error("an unknown format is accepted")
	}
}

// json and yaml hold the rows whole: the full NACK detail and versions.
func TestPrintRowsJSONAndYAML(t *testing.T) {
	var b bytes.Buffer
	if err := printRows(&b, outputJSON, rows, now); err != nil {
		t.Fatal(err)
	}
	var got struct{ Proxies []debug.ProxyRow }
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Proxies) != 2 || got.Proxies[0].NACK != rows[0].NACK || got.Proxies[0].Types[1].Acked != "cccccccc11111111" {
		t.Errorf("json: %s", b.String())
	}
	b.Reset()
	if err := printRows(&b, outputYAML, rows, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"proxies:\n- connectedSince:", "  state: NACKED\n", "nackVersion: cccccccc22222222"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("yaml has no %q:\n%s", want, b.String())
		}
	}
}

func TestPrintVersions(t *testing.T) {
	var b bytes.Buffer
	err := printVersions(&b, outputTable, []versionLine{
		{Component: "kubectl-envoy", Version: "v1.2.0", Revision: "abc"},
		{Component: "operator", Replica: "op-0", Version: "v1.1.0", Revision: "def"},
		{Component: "operator", Replica: "op-1", Error: "forbidden"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `COMPONENT       REPLICA   VERSION               REVISION
kubectl-envoy   -         v1.2.0                abc
operator        op-0      v1.1.0                def
operator        op-1      unknown (forbidden)   -
`
	if b.String() != want {
		t.Errorf("versions:\n%s\nwant:\n%s", b.String(), want)
	}
}
