package bench

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestPacerWait follows one worker through a schedule on synctest's clock,
// which moves only when every goroutine waits: each call's slot, when it
// returned, and whether the worker may send.
func TestPacerWait(t *testing.T) {
	const ms = time.Millisecond
	type call struct {
		due, at time.Duration // the slot's time and the return's, from the start
		ok      bool
	}
	tests := []struct {
		name     string
		rate     int64
		duration time.Duration
		late     time.Duration // the worker's first wait starts this long after the start
		busy     time.Duration // each request then takes this long
		cancelAt time.Duration // the context ends then; 0: never
		want     []call
	}{
		{"on time: every slot waited for, the one at the end refused", 100, 40 * ms, 0, 0, 0, []call{
			{0, 0, true}, {10 * ms, 10 * ms, true}, {20 * ms, 20 * ms, true}, {30 * ms, 30 * ms, true}, {40 * ms, 30 * ms, false}}},
		{"late start: past slots at once, latency counted from them", 100, 50 * ms, 25 * ms, 0, 0, []call{
			{0, 25 * ms, true}, {10 * ms, 25 * ms, true}, {20 * ms, 25 * ms, true}, {30 * ms, 30 * ms, true}, {40 * ms, 40 * ms, true}, {50 * ms, 40 * ms, false}}},
		{"slow requests: no wait until caught up, no slot skipped", 100, 50 * ms, 0, 14 * ms, 0, []call{
			{0, 0, true}, {10 * ms, 14 * ms, true}, {20 * ms, 28 * ms, true}, {30 * ms, 42 * ms, true}, {40 * ms, 56 * ms, true}, {50 * ms, 70 * ms, false}}},
		{"context ends while waiting", 100, time.Second, 0, 0, 15 * ms, []call{
			{0, 0, true}, {10 * ms, 10 * ms, true}, {20 * ms, 15 * ms, false}}},
		{"one slot a second", 1, 2500 * ms, 0, 0, 0, []call{
			{0, 0, true}, {time.Second, time.Second, true}, {2 * time.Second, 2 * time.Second, true}, {3 * time.Second, 2 * time.Second, false}}},
		{"run shorter than an interval: one slot", 1, 100 * ms, 0, 0, 0, []call{
			{0, 0, true}, {time.Second, 0, false}}},
		// 1s/7 is 142.857142ms and a bit: added up seven times it would
		// fall inside the second and give an eighth slot.
		{"7/s: seven slots a second, not eight", 7, time.Second, 0, 0, 0, []call{
			{0, 0, true}, {142857142, 142857142, true}, {285714285, 285714285, true}, {428571428, 428571428, true},
			{571428571, 571428571, true}, {714285714, 714285714, true}, {857142857, 857142857, true}, {time.Second, 857142857, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				start := time.Now()
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				p := &pacer{start: start, end: start.Add(tt.duration), rate: tt.rate}
				time.Sleep(tt.late)
				var timer *time.Timer
				var got []call
				for {
					due, ok := p.wait(ctx, &timer)
					got = append(got, call{due.Sub(start), time.Since(start), ok})
					if !ok || len(got) > len(tt.want) {
						break
					}
					time.Sleep(tt.busy)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("calls\n got  %v\n want %v", got, tt.want)
				}
			})
		})
	}
}

// TestPacerShared: workers sharing the schedule take every slot exactly
// once, each when it is due, and nothing past the end, however many there
// are.
func TestPacerShared(t *testing.T) {
	for _, workers := range []int{1, 2, 7, 64} {
		synctest.Test(t, func(t *testing.T) {
			const rate, slots = 200, 200
			start := time.Now()
			p := &pacer{start: start, end: start.Add(time.Second), rate: rate}
			var (
				mu    sync.Mutex
				dues  []time.Duration
				early int
			)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					var timer *time.Timer
					for {
						due, ok := p.wait(t.Context(), &timer)
						if !ok {
							return
						}
						mu.Lock()
						dues = append(dues, due.Sub(start))
						if time.Now().Before(due) {
							early++
						}
						mu.Unlock()
						time.Sleep(3 * time.Millisecond) // the request
					}
				})
			}
			wg.Wait()
			slices.Sort(dues)
			want := make([]time.Duration, slots)
			for i := range want {
				want[i] = time.Duration(i) * time.Second / rate
			}
			if !slices.Equal(dues, want) || early != 0 {
				t.Errorf("%d workers took slots %v (%d early), want each of the %d slots once, none early", workers, dues, early, slots)
			}
		})
	}
}
