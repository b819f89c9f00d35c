package bench

import (
	"context"
	"sync/atomic"
	"time"
)

// pacer spreads the requests of a paced run (Config.Rate) evenly over
// time: slot n is due at start + n/rate seconds, and each request takes the
// next free slot, whichever worker sends it. Taking a slot is one atomic
// add; a worker that is behind finds its slot due already and does not
// wait.
type pacer struct {
	start, end time.Time
	rate       int64 // slots a second
	next       atomic.Int64
}

// due is when slot n is due. It is computed from n, not by adding up an
// interval: time.Second/rate truncates (142.857142ms at 7/s), and the sum
// would fit an extra slot into the run. n*1e9 cannot overflow: a run holds
// at most MaxRate*MaxDuration (3.6e9) slots.
func (p *pacer) due(n int64) time.Time {
	return p.start.Add(time.Duration(n * int64(time.Second) / p.rate))
}

// wait takes the next slot and sleeps until it is due, on the worker's own
// timer (created on first use), and returns when it was due: latency counts
// from then. It returns false, without sleeping, when the slot falls at or
// after the end of the run, and when ctx ends first.
func (p *pacer) wait(ctx context.Context, t **time.Timer) (time.Time, bool) {
	due := p.due(p.next.Add(1) - 1)
	if !due.Before(p.end) {
		return due, false
	}
	d := time.Until(due)
	if d <= 0 {
		return due, true
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-(*t).C:
		return due, true
	case <-ctx.Done():
		return due, false
	}
}
