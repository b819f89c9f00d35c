package backoff

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

const ms = time.Millisecond

// TestBounds: the n-th pause's bound is min(Max, Base*2^n), and every pause
// drawn lies in [0, bound).
func TestBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		base, max time.Duration
		want      []time.Duration // the bounds of the first pauses
	}{
		{"doubles to the cap", 50 * ms, 2 * time.Second,
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2 * time.Second, 2 * time.Second}},
		{"cap not a power of two of base", 50 * ms, time.Second,
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"base equals max", ms, ms, []time.Duration{ms, ms, ms}},
		{"max below base", 100 * ms, 10 * ms, []time.Duration{10 * ms, 10 * ms}},
		{"zero base", 0, time.Second, []time.Duration{0, 0}},
		{"zero max", ms, 0, []time.Duration{0, 0}},
		{"negative", -ms, time.Second, []time.Duration{0}},
		{"no overflow near the largest duration", time.Duration(1 << 62), time.Duration(1<<63 - 1),
			[]time.Duration{1 << 62, 1<<63 - 1, 1<<63 - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := Backoff{Base: tt.base, Max: tt.max}
			for i, want := range tt.want {
				if got := b.Bound(); got != want {
					t.Fatalf("bound of pause %d = %v, want %v", i, got, want)
				}
				probe := b // same position in the sequence
				for range 200 {
					p := probe
					if d := p.Next(); d < 0 || (want == 0 && d != 0) || (want > 0 && d >= want) {
						t.Fatalf("pause %d = %v, want in [0, %v)", i, d, want)
					}
				}
				b.Next()
			}
		})
	}
}

// TestSpread: independent sequences do not retry in step. 1000 sequences'
// 5th pauses lie within their bound, are not all equal, and cover the
// window: both its halves and its first tenth are hit (each misses with a
// chance of 2^-1000 or 0.9^1000).
func TestSpread(t *testing.T) {
	t.Parallel()
	const base, maxD, n = 50 * ms, 2 * time.Second, 1000
	bound := 800 * ms // the 5th: 50ms * 2^4
	fifth := make([]time.Duration, n)
	for i := range fifth {
		b := Backoff{Base: base, Max: maxD}
		for range 4 {
			b.Next()
		}
		fifth[i] = b.Next()
	}
	var low, high, first bool
	for _, d := range fifth {
		if d < 0 || d >= bound {
			t.Fatalf("5th pause %v, want in [0, %v)", d, bound)
		}
		low = low || d < bound/2
		high = high || d >= bound/2
		first = first || d < bound/10
	}
	slices.Sort(fifth)
	distinct := len(slices.Compact(fifth))
	if distinct < n/2 || !low || !high || !first {
		t.Errorf("5th pauses of %d sequences: %d distinct, lower half %v, upper half %v, first tenth %v; want spread over [0, %v)",
			n, distinct, low, high, first, bound)
	}
}

// TestFirstPausePrompt: the first retry comes within Base, as it did before
// jitter, and Reset brings the sequence back there.
func TestFirstPausePrompt(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: 50 * ms, Max: 2 * time.Second}
	for range 10 {
		b.Next()
	}
	if got := b.Bound(); got != 2*time.Second {
		t.Fatalf("bound after 10 pauses %v, want the cap", got)
	}
	b.Reset()
	if got := b.Bound(); got != 50*ms {
		t.Fatalf("bound after Reset %v, want Base", got)
	}
	for range 100 {
		c := Backoff{Base: 50 * ms, Max: 2 * time.Second}
		if d := c.Next(); d >= 50*ms {
			t.Fatalf("first pause %v, want below 50ms", d)
		}
	}
}

// TestSleep: Sleep waits its duration, and no longer than its context.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(context.Background(), time.Second); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Sleep(1s) = %v after %s, want nil after 1s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); err != context.DeadlineExceeded || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("Sleep(1h) under a 100ms deadline = %v after %s, want DeadlineExceeded after 100ms", err, time.Since(start))
		}
	})
}
