package measure

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSizes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []int
	}{
		{"100,1000", []int{100, 1000}},
		{" 3 , 5", []int{3, 5}},
		{"7", []int{7}},
		{"", nil},
		{"100,", nil},
		{"100,,1000", nil},
		{"1k", nil},
		{"0", nil},
		{"-5", nil},
		{"small", nil},
	} {
		got, err := Sizes(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("Sizes(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Sizes(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	if _, err := Size("x"); err == nil {
		t.Error("Size(x): no error")
	}
	if n, err := Size("20"); err != nil || n != 20 {
		t.Errorf("Size(20) = %d, %v", n, err)
	}
}

// auditLine is an audit event as the API server logs it at Metadata level,
// trimmed to what matters here.
func auditLine(verb, ua, ns, resource, sub string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"ResponseComplete","requestURI":"/api/v1/...","verb":"` + verb +
		`","user":{"username":"admin"},"sourceIPs":["127.0.0.1"],"userAgent":"` + ua +
		`","objectRef":{"resource":"` + resource + `","namespace":"` + ns + `","subresource":"` + sub + `","apiVersion":"v1"},"responseStatus":{"code":201}}`
}

func TestAudit(t *testing.T) {
	log := strings.Join([]string{
		auditLine("create", "kube-envoy-controller", "bench-podset", "pods", ""),
		auditLine("create", "kube-envoy-controller", "bench-podset", "pods", ""),
		auditLine("update", "kube-envoy-controller", "bench-podset", "podsets", "status"),
		auditLine("create", "kube-envoy-controller", "bench-other", "pods", ""),
		auditLine("patch", "kwok/v0.7", "bench-podset", "pods", "status"),
		auditLine("create", "kec-bench", "bench-podset", "podsets", ""),
		auditLine("create", "kube-envoy-controller", "bench-podset", "secrets", ""),
	}, "\n") + "\n" + `{"kind":"Event","stage":"ResponseCo` // a line being written
	events, err := ParseAudit([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 7 {
		t.Fatalf("%d events, want 7", len(events))
	}
	got := CountWrites(events, WriteFilter{Namespace: "bench-podset", UserAgent: "kube-envoy-controller", Resources: []string{"pods", "podsets"}})
	want := map[string]int{"create pods": 2, "update podsets/status": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operator writes %v, want %v", got, want)
	}
	own := CountWrites(events, WriteFilter{Namespace: "bench-podset", UserAgent: "kec-bench"})
	if !reflect.DeepEqual(own, map[string]int{"create podsets": 1}) {
		t.Errorf("benchmark's writes %v", own)
	}
}

func TestByResource(t *testing.T) {
	for _, tt := range []struct {
		in, want map[string]int
	}{
		{map[string]int{}, map[string]int{}},
		{
			map[string]int{"create deployments": 100, "update deployments": 3, "update foos/status": 250, "create events": 100, "patch events": 2},
			map[string]int{"deployments": 103, "foos/status": 250, "events": 102},
		},
		// A subresource is its own resource: a status update is not a spec write.
		{map[string]int{"update foos": 1, "update foos/status": 2}, map[string]int{"foos": 1, "foos/status": 2}},
	} {
		if got := ByResource(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ByResource(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestAuditRejectsAnUnparseableLine(t *testing.T) {
	log := auditLine("create", "a", "b", "pods", "") + "\nnot json\n" + auditLine("create", "a", "b", "pods", "") + "\n"
	if _, err := ParseAudit([]byte(log)); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("ParseAudit = %v, want an error on line 2", err)
	}
}

// Lines far beyond bufio.Scanner's default 64 KiB are read whole.
func TestAuditLongLine(t *testing.T) {
	long := strings.Replace(auditLine("create", "a", "b", "pods", ""), `"requestURI":"/api/v1/..."`, `"requestURI":"/`+strings.Repeat("x", 4<<20)+`"`, 1)
	events, err := ParseAudit([]byte(long + "\n"))
	if err != nil || len(events) != 1 {
		t.Fatalf("ParseAudit = %d events, %v", len(events), err)
	}
}

const apiserverMetrics = `# HELP apiserver_admission_webhook_admission_duration_seconds [STABLE] Admission webhook latency in seconds.
# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="inject.watch.my.domain",operation="CREATE",rejected="false",type="admit",le="0.005"} 10
apiserver_admission_webhook_admission_duration_seconds_bucket{name="inject.watch.my.domain",operation="CREATE",rejected="false",type="admit",le="+Inf"} 40
apiserver_admission_webhook_admission_duration_seconds_sum{name="inject.watch.my.domain",operation="CREATE",rejected="false",type="admit"} 2.5
apiserver_admission_webhook_admission_duration_seconds_count{name="inject.watch.my.domain",operation="CREATE",rejected="false",type="admit"} 40
apiserver_admission_webhook_admission_duration_seconds_bucket{name="inject.watch.my.domain",operation="CREATE",rejected="true",type="admit",le="+Inf"} 2
apiserver_admission_webhook_admission_duration_seconds_sum{name="inject.watch.my.domain",operation="CREATE",rejected="true",type="admit"} 0.5
apiserver_admission_webhook_admission_duration_seconds_count{name="inject.watch.my.domain",operation="CREATE",rejected="true",type="admit"} 2
apiserver_admission_webhook_admission_duration_seconds_bucket{name="validate.example.com",operation="CREATE",rejected="false",type="validating",le="+Inf"} 7
apiserver_admission_webhook_admission_duration_seconds_sum{name="validate.example.com",operation="CREATE",rejected="false",type="validating"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="validate.example.com",operation="CREATE",rejected="false",type="validating"} 7
# HELP kube_envoy_controller_xds_connected_proxies Proxies connected.
# TYPE kube_envoy_controller_xds_connected_proxies gauge
kube_envoy_controller_xds_connected_proxies{fleet="a/edge"} 3
kube_envoy_controller_xds_connected_proxies{fleet="b/edge"} 0
`

func TestSum(t *testing.T) {
	fams, err := ParseMetrics([]byte(apiserverMetrics))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Sum(fams, "apiserver_admission_webhook_admission_duration_seconds", map[string]string{"name": "inject.watch.my.domain"})
	if err != nil || s != (Series{Matched: 2, Count: 42, Sum: 3}) {
		t.Errorf("webhook = %+v, %v", s, err)
	}
	s, err = Sum(fams, "apiserver_admission_webhook_admission_duration_seconds", map[string]string{"name": "no-such-hook"})
	if err != nil || s.Matched != 0 {
		t.Errorf("another webhook = %+v, %v", s, err)
	}
	s, err = Sum(fams, "kube_envoy_controller_xds_connected_proxies", nil)
	if err != nil || s != (Series{Matched: 2, Value: 3}) {
		t.Errorf("connected = %+v, %v", s, err)
	}
	if _, err := Sum(fams, "apiserver_admission_webhook_admission_latencies_seconds", nil); !errors.Is(err, ErrNoFamily) {
		t.Errorf("a missing metric: %v, want ErrNoFamily", err)
	}
}

func TestParseProcStatus(t *testing.T) {
	status := "Name:\tkube-envoy-cont\nVmPeak:\t 1923456 kB\nVmHWM:\t  140000 kB\nVmRSS:\t  120000 kB\nThreads:\t12\n"
	m, err := ParseProcStatus([]byte(status))
	if err != nil || m != (ProcMemory{Peak: 140000 << 10, Current: 120000 << 10}) {
		t.Errorf("ParseProcStatus = %+v, %v", m, err)
	}
	// A kernel thread, or a process that has exited (a zombie), has no VmRSS.
	if _, err := ParseProcStatus([]byte("Name:\tx\nState:\tZ (zombie)\n")); err == nil {
		t.Error("no memory lines: no error")
	}
	if _, err := ParseProcStatus([]byte("VmHWM:\t  140000 kB\n")); err == nil {
		t.Error("no VmRSS: no error")
	}
}

func TestParseHeapProfile(t *testing.T) {
	profile := "heap profile: 10: 2048 [100: 40960] @ heap/524288\n1: 2048 [1: 2048] @ 0x1\n\n# runtime.MemStats\n# Alloc = 5000\n# TotalAlloc = 90000\n# Sys = 30000000\n# HeapAlloc = 5000\n# HeapSys = 8000\n# HeapInuse = 7000\n# Stack = 655360 / 655360\n# NumGC = 12\n# NumForcedGC = 3\n"
	h, err := ParseHeapProfile([]byte(profile))
	if err != nil || h != (HeapStats{HeapAlloc: 5000, HeapInuse: 7000, Sys: 30000000, StackInuse: 655360, NumForcedGC: 3}) {
		t.Errorf("ParseHeapProfile = %+v, %v", h, err)
	}
	// The binary form (debug=0) has no statistics.
	if _, err := ParseHeapProfile([]byte("\x1f\x8b\x08\x00")); err == nil {
		t.Error("a binary profile: no error")
	}
}

func TestParseProcStat(t *testing.T) {
	// A name with a space and a parenthesis; utime 250 and stime 50 ticks.
	stat := "4242 (con tour)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 1000000 500 18446744073709551615\n"
	got, err := ParseProcStat([]byte(stat))
	if err != nil || got != 3 {
		t.Errorf("ParseProcStat = %v, %v; want 3 (300 ticks)", got, err)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 u 50 0"} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("ParseProcStat(%q) did not fail", bad)
		}
	}
}
