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
