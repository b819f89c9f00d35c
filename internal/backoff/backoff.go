// Package backoff paces retries: exponential growth with full jitter.
//
// Why jitter: after a database outage or a server restart, every tag on
// every server (and every client of every server) fails at once. Pauses that
// only double keep them in step, so they all come back in the same
// millisecond, again and again. Full jitter, as defined in the AWS
// Architecture Blog's "Exponential Backoff And Jitter", draws each pause
// uniformly from [0, min(Max, Base*2^n)) for the n-th retry (n from 0): the
// retries spread over the window, and the window still grows so a long
// outage is not hammered. The first pause is below Base, so the first retry
// stays as prompt as it was.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff draws the pauses of one sequence of retries. The zero value with
// Base and Max set is ready; it is not safe for concurrent use (each retry
// loop has its own).
type Backoff struct {
	// Base is the bound of the first pause.
	Base time.Duration
	// Max caps the bound of every pause; the pauses stay below it. A Max
	// below Base is the bound from the first pause on. Unless both are
	// positive, every pause is 0.
	Max time.Duration

	n int // pauses drawn so far
}

// Next returns the next pause: uniformly random in [0, Bound()), then
// doubles the bound (up to Max).
func (b *Backoff) Next() time.Duration {
	bound := b.Bound()
	b.n++
	if bound <= 0 {
		return 0
	}
	return rand.N(bound)
}

// Bound is the exclusive upper bound of the next pause: min(Max, Base*2^n).
func (b *Backoff) Bound() time.Duration {
	if b.Base <= 0 || b.Max <= 0 {
		return 0
	}
	bound := b.Base
	for range b.n {
		if bound >= b.Max || bound > b.Max/2 {
			return b.Max
		}
		bound *= 2
	}
	return min(bound, b.Max)
}

// Reset starts the sequence again, after a success.
func (b *Backoff) Reset() { b.n = 0 }

// Sleep waits d, or until ctx is done: then it returns ctx.Err(). It is the
// pause between retries of every caller that paces them by a Backoff.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
