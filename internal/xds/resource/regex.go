package resource

import (
	"fmt"
	"regexp/syntax"
	"unicode/utf8"
)

// Envoy compiles every regular expression with RE2 (google_re2, its only
// engine). Go's regexp/syntax parses RE2's syntax, with Perl's classes and
// flags as RE2 has them by default, so a regular expression that Go refuses
// RE2 refuses too. What differs:
//   - RE2 has \C (any byte), which Go refuses: a regular expression with
//     \C is refused here although Envoy would take it;
//   - the Unicode tables (\p{Greek}, case folding) are those of Go's and of
//     RE2's Unicode versions, which may differ for new scripts;
//   - the error messages are Go's, not RE2's ("missing argument to
//     repetition operator: `+`" where RE2 says "no argument for repetition
//     operator: +").
//
// Envoy also refuses a regular expression whose compiled RE2 program has
// more instructions than its limit, 100 by default (the runtime key
// re2.max_program_size.error_level, which the fleet's bootstrap leaves
// alone). Go compiles to another instruction set, so the size is not
// measured: programLowerBound counts instructions that RE2's program has at
// least, and a regular expression is refused when that bound is over the
// limit. Every refusal is right; some programs over the limit (those that
// RE2 does not compile much larger than their bound) are not caught.

// defaultMaxProgramSize is Envoy's default re2.max_program_size.error_level.
const defaultMaxProgramSize = 100

// checkRegex returns why RE2, as Envoy runs it, would refuse re, or nil.
// limit is the largest program size allowed, and what names it.
func checkRegex(re string, limit uint32, what string) error {
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return fmt.Errorf("not a valid RE2 regular expression: %w", err)
	}
	if n := programLowerBound(parsed); n > int(limit) {
		return fmt.Errorf("RE2 compiles it to at least %d instructions, over %s of %d: simplify it, for example with fewer or smaller counted repetitions ({n,m})", n, what, limit)
	}
	return nil
}

// programLowerBound returns a number of instructions that the RE2 program of
// re has at least, as RE2::ProgramSize counts them: its fail and match
// instructions, the loop that lets an expression not anchored with ^ start
// anywhere, and one instruction for each byte range it matches. RE2 expands
// counted repetitions as Simplify does, factors alternations as Go's parser
// does, and compiles each copy and each alternative on its own.
//
// RE2 takes the literal that follows ^ out of the program, and matches it
// on its own (its required prefix): its bytes are not counted.
func programLowerBound(re *syntax.Regexp) int {
	n := 2 + ranges(re.Simplify()) // fail and match
	if !anchoredStart(re) {
		n += 2 // the unanchored prefix, (?s).*? over bytes: a loop and a byte range
	}
	if re.Op == syntax.OpConcat && len(re.Sub) > 1 && re.Sub[0].Op == syntax.OpBeginText && re.Sub[1].Op == syntax.OpLiteral {
		n -= ranges(re.Sub[1])
	}
	return n
}

func anchoredStart(re *syntax.Regexp) bool {
	for {
		switch re.Op {
		case syntax.OpBeginText:
			return true
		case syntax.OpConcat, syntax.OpCapture:
			if len(re.Sub) == 0 {
				return false
			}
			re = re.Sub[0]
		default:
			return false
		}
	}
}

// ranges counts the byte-range instructions re needs at least.
func ranges(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r) // one instruction per byte (case folding is a flag on it)
		}
		return n
	case syntax.OpCharClass:
		return classRanges(re.Rune)
	case syntax.OpAnyCharNotNL:
		return 2 // [00-09] and [0b-7f], and more for multibyte characters
	case syntax.OpAnyChar:
		return 1
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return ranges(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			n += ranges(s)
		}
		return n
	}
	// Empty-width assertions, empty matches, and repeats (which Simplify
	// has expanded) need no byte range of their own.
	return 0
}

// classRanges counts the ASCII ranges of a character class, each a byte
// range of its own, and one more for any non-ASCII part. Like RE2, it drops
// the upper-case ranges of a class that folds ASCII case: RE2 matches them
// with the lower-case ones' case-folding flag.
func classRanges(rs []rune) int {
	in := func(r rune) bool {
		for i := 0; i+1 < len(rs); i += 2 {
			if rs[i] <= r && r <= rs[i+1] {
				return true
			}
		}
		return false
	}
	folds := true
	for c := 'A'; c <= 'Z'; c++ {
		if in(c) != in(c+'a'-'A') {
			folds = false
			break
		}
	}
	n, wide := 0, false
	for i := 0; i+1 < len(rs); i += 2 {
		lo, hi := rs[i], rs[i+1]
		if hi > utf8.RuneSelf-1 {
			wide = true
			hi = utf8.RuneSelf - 1
		}
		if lo > hi || folds && 'A' <= lo && hi <= 'Z' {
			continue
		}
		n++
	}
	if wide {
		n++
	}
	return n
}
