package testutil

import "testing"

// WaitForState is WaitFor for a condition that can say how things stand
// while it does not hold (a server's answer, the last error): when the
// wait times out, the last thing cond said is logged with the failure, so
// that it shows what the test was stuck on rather than only what it
// waited for.
func WaitForState(t testing.TB, what string, cond func() (ok bool, state string)) {
	t.Helper()
	var state string
	met := false
	defer func() {
		// WaitFor ends the test with t.Fatalf, whose runtime.Goexit runs
		// this: the state is logged under the failure.
		if !met {
			t.Logf("%s: last seen: %s", what, state)
		}
	}()
	WaitFor(t, what, func() bool {
		var ok bool
		ok, state = cond()
		return ok
	})
	met = true
}
