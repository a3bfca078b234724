package controller

import (
	"testing"
)

func TestEnabled(t *testing.T) {
	tests := []struct {
		selection []string
		name      string
		want      bool
	}{
		{[]string{"*"}, "foo", true},
		{[]string{"foo"}, "foo", true},
		{[]string{"podset"}, "foo", false},
		{[]string{"*", "-foo"}, "foo", false},
		{[]string{"-foo", "*"}, "foo", false},
		{[]string{"*", "-podset"}, "foo", true},
		{[]string{"-foo"}, "foo", false},
		{[]string{"-podset"}, "foo", false},
	}
	for _, tt := range tests {
		if got := Enabled(tt.selection, tt.name); got != tt.want {
			t.Errorf("Enabled(%q, %q) = %v, want %v", tt.selection, tt.name, got, tt.want)
		}
	}
}

func TestParseSelection(t *testing.T) {
	if _, err := ParseSelection("*,-foo"); err != nil {
		t.Errorf("valid selection refused: %v", err)
	}
	if got, err := ParseSelection(" foo , "); err != nil || len(got) != 1 || got[0] != "foo" {
		t.Errorf("ParseSelection(\" foo , \") = %q, %v", got, err)
	}
	for _, bad := range []string{"", ",", "nope", "*,-nope"} {
		if _, err := ParseSelection(bad); err == nil {
			t.Errorf("ParseSelection(%q) accepted an invalid selection", bad)
		}
	}
}
