package resource

import (
	"regexp/syntax"
	"testing"
)

// The program sizes Envoy v1.40's RE2 gives (RE2::ProgramSize; a real Envoy
// says them, TestProgramSizesAreEnvoys) for regular expressions a fleet
// might use. programLowerBound must never be
// above them (it would refuse a regular expression Envoy takes), and a
// regular expression is refused when its bound is over Envoy's limit of 100.
var re2ProgramSizes = []struct {
	regex string
	re2   int
}{
	{"a", 5},
	{"^a", 4},
	{"abc", 7},
	{"/asdf/.*", 12},
	{".*", 6},
	{"^.*$", 4},
	{"(?i)hello", 9},
	{"[A-Za-z]", 5},
	{"(?i)[a-z]+", 6},
	{`\d{3}-\d{4}`, 12},
	{"^/v1/(users|groups|orgs)/[^/]+$", 25},
	{`^/static/.+\.(css|js|png|jpg|svg)$`, 24},
	{"(foo|foobar|food)", 14},
	{"^/(en|de|fr|es|it|nl|pt|pl|sv|da|fi|no)/.*", 32},
	{`\bword\b`, 10},
	{`\p{Greek}+`, 67},
	{"[a-f0-9]{32}", 68},
	{"^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$", 70},
	{"(?:abc){20}", 64},
	{"x{50}", 54},
	{"x{99}", 103},
	{"x{100}", 104},
	{".{5,40}", 119},
	{"[a-z0-9-]{1,64}", 259},
	{"^/api/v[0-9]+/users/[a-z0-9-]{1,64}$", 268},
	{"^/api/[a-zA-Z0-9_]{1,20}/items/[0-9]{1,10}$", 109},
	// At the limit: RE2 matches the literal after ^ on its own.
	{"^/user/(488/sms|h5/getJwt|captcha|version/getAIDrawTemplate|version/isMainLand|version/promotionTemplate|version/activityTemplate2).*", 100},
}

func TestProgramLowerBound(t *testing.T) {
	caught := 0
	for _, tc := range re2ProgramSizes {
		re, err := syntax.Parse(tc.regex, syntax.Perl)
		if err != nil {
			t.Fatalf("%s: %v", tc.regex, err)
		}
		bound := programLowerBound(re)
		if bound > tc.re2 {
			t.Errorf("%s: bound %d is above RE2's program size %d", tc.regex, bound, tc.re2)
		}
		refused := checkRegex(tc.regex, defaultMaxProgramSize, "the limit") != nil
		if refused != (bound > defaultMaxProgramSize) {
			t.Errorf("%s: refused %v with bound %d", tc.regex, refused, bound)
		}
		if refused && tc.re2 <= defaultMaxProgramSize {
			t.Errorf("%s: refused, but RE2's program size %d is within the limit", tc.regex, tc.re2)
		}
		if refused {
			caught++
		}
	}
	// The common traps, a counted repetition of a class, are caught.
	if caught < 4 {
		t.Errorf("only %d of the regular expressions over the limit are refused", caught)
	}
}
