package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// failures records how a wait failed the test it was given, instead of
// failing the real one.
type failures struct {
	testing.TB
	fatal string
}

func (f *failures) Helper() {}

func (f *failures) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// poll runs Poll with a recording test and returns how it failed ("" if it
// did not) and how often it asked cond.
func poll(timeout time.Duration, cond func(calls int) (bool, error)) (fatal string, calls int) {
	f := &failures{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Poll(f, time.Millisecond, timeout, "the test's condition", func() (bool, error) {
			calls++
			return cond(calls)
		})
	}()
	<-done
	return f.fatal, calls
}

// A wait ends when its condition holds; an error goes on waiting and is
// reported if the condition never holds; an Unexpected error ends the wait
// at once, with the failure it names.
func TestPoll(t *testing.T) {
	if fatal, calls := poll(time.Hour, func(n int) (bool, error) { return n == 3, errors.New("not yet") }); fatal != "" || calls != 3 {
		t.Errorf("a condition that holds on the third call: failed %q after %d calls", fatal, calls)
	}
	fatal, calls := poll(50*time.Millisecond, func(int) (bool, error) { return false, errors.New("still 2 pods") })
	if !strings.HasPrefix(fatal, "timed out after 50ms waiting for the test's condition") || !strings.Contains(fatal, "still 2 pods") || calls < 2 {
		t.Errorf("a condition that never holds: failed %q after %d calls", fatal, calls)
	}
	// Bounded, so that a wait that does not stop ends the test anyway.
	fatal, calls = poll(5*time.Second, func(n int) (bool, error) {
		if n == 2 {
			return false, Unexpected("the Job was created %s", "again")
		}
		return false, errors.New("not yet")
	})
	if fatal != "waiting for the test's condition: the Job was created again" || calls != 2 {
		t.Errorf("an unexpected outcome on the second call: failed %q after %d calls", fatal, calls)
	}
}

// consistently runs Consistently with a recording test and returns how it
// failed ("" if it did not) and how often it asked check.
func consistently(window time.Duration, check func(calls int) error) (fatal string, calls int) {
	f := &failures{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Consistently(f, window, func() error {
			calls++
			return check(calls)
		})
	}()
	<-done
	return f.fatal, calls
}

func (f *failures) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

// A window passes when nothing happens in it, checked from its start to its
// end; the first thing that happens fails the test at once.
func TestConsistently(t *testing.T) {
	if fatal, calls := consistently(3*CheckInterval, func(int) error { return nil }); fatal != "" || calls < 2 {
		t.Errorf("a window in which nothing happens: failed %q after %d calls", fatal, calls)
	}
	fatal, calls := consistently(time.Hour, func(n int) error {
		if n == 2 {
			return errors.New("the follower sent write requests")
		}
		return nil
	})
	if fatal != "the follower sent write requests" || calls != 2 {
		t.Errorf("a write on the second check: failed %q after %d calls", fatal, calls)
	}
}

// A steady wait ends once the value reads the same twice in a row, and
// returns it; one that keeps changing times out with its last two reads.
func TestSteady(t *testing.T) {
	reads := []int{1, 4, 4}
	f := &failures{}
	var got int
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = Steady(f, time.Millisecond, time.Hour, "the count", func() (int, error) {
			v := reads[0]
			reads = reads[1:]
			return v, nil
		})
	}()
	<-done
	if f.fatal != "" || got != 4 || len(reads) != 0 {
		t.Errorf("reads 1, 4, 4: returned %d, failed %q, %d reads left", got, f.fatal, len(reads))
	}
	f = &failures{}
	n := 0
	done = make(chan struct{})
	go func() {
		defer close(done)
		Steady(f, time.Millisecond, 50*time.Millisecond, "the count", func() (int, error) { n++; return n, nil })
	}()
	<-done
	if !strings.HasPrefix(f.fatal, "timed out after 50ms waiting for the count") || !strings.Contains(f.fatal, ", then ") {
		t.Errorf("a count that keeps growing: failed %q", f.fatal)
	}
}
