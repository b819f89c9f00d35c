package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
)

// /readyz warns, in its documented form, before a formatted tag's sequence
// outgrows the width: "degraded", then "tag NAME: format SPEC runs out ..."
// once no more than the next range's step is left, answered 200 (a
// degraded server still issues) and 503 under ?strict=1. Far from the
// width, and for a tag with room, it stays "ok".
func TestFormatWarningReadyz(t *testing.T) {
	// The clock stands still, so that no tag has a rate: the warning is
	// then the step's ("at the next range"), word for word. MaxStep pins
	// the adaptive step, so that the next range's step stays 100.
	clk := testutil.NewClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	base := sqliteServerWith(t, func(s *segment.Config) {
		s.Now, s.MaxStep = clk.Now, 100
	})
	// T{seq:3} holds 1..999.
	createTag(t, base, `{"tag":"tiny","start":1,"step":100,"format":"T{seq:3}"}`)
	createTag(t, base, `{"tag":"roomy","start":1,"step":100,"format":"R{seq:8}"}`)
	if r := do(t, "GET", base, "/v2/segment/roomy/batch?count=150", ""); r.status != 200 {
		t.Fatalf("roomy: %d %s", r.status, r.body)
	}

	const ok = "ok\n"
	// Once the width is used up, the load of the next range, which is
	// refused, may or may not have been tried yet: its reason may be there too.
	const refused = "tag tiny: no IDs buffered\n"
	for _, c := range []struct {
		name   string
		count  int   // IDs issued from tiny before the probe
		last   int64 // the last of them
		body   string
		strict int
		maybe  string // a line the body may hold as well
	}{
		{"far from the width", 1, 1, ok, 200, ""},
		{"one more than a step left", 897, 898, ok, 200, ""},
		{"a step left", 1, 899, "degraded\ntag tiny: format T{seq:3} runs out at the next range\n", 503, ""},
		{"run out", 100, 999, "degraded\ntag tiny: format T{seq:3} has run out\n", 503, refused},
	} {
		var a formattedAnswer
		decodeStrict(t, do(t, "GET", base, fmt.Sprintf("/v2/segment/tiny/batch?count=%d", c.count), ""), &a)
		if n := len(a.IDs); n != c.count || a.IDs[n-1] != c.last {
			t.Fatalf("%s: issued %d IDs up to %v, want %d up to %d", c.name, n, a.IDs[max(n-1, 0):], c.count, c.last)
		}
		for _, p := range []struct {
			target string
			status int
		}{{"/readyz", http.StatusOK}, {"/readyz?strict=1", c.strict}} {
			r := do(t, "GET", base, p.target, "")
			if c.maybe != "" {
				r.body = strings.Replace(r.body, c.maybe, "", 1)
			}
			if r.status != p.status || r.body != c.body {
				t.Errorf("%s: %s = %d %q, want %d %q", c.name, p.target, r.status, r.body, p.status, c.body)
			}
		}
	}
}
