package translate

import (
	"testing"
)

// BenchmarkPolicyCheck judges every resource of the samples' fleet (and
// moreResources), as admission does on a change, without the remembered
// verdicts: the cost of the content policy per admission of the fleet.
func BenchmarkPolicyCheck(b *testing.B) {
	fleet := samplesFleet(b)
	var n int
	for _, c := range fleet {
		p, errs := parse(c)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		n += len(p.resources)
		if got := testPolicy.refusals(c.Name, p.resources); len(got) > 0 {
			b.Fatalf("%s is refused: %q", c.Name, got)
		}
	}
	parsed := make([]parsed, len(fleet))
	for i, c := range fleet {
		parsed[i], _ = parse(c)
	}
	b.ResetTimer()
	for range b.N {
		for _, p := range parsed {
			for _, r := range p.resources {
				testPolicy.check(r, "default")
			}
		}
	}
	b.ReportMetric(float64(n), "resources")
}
