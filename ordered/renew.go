package ordered

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/parallel"
)

// renewer renews the leases of the ordered tags this server owns: one
// goroutine, and one leaf.OrderedStore.RenewTags call per
// leaf.MaxRenewBatch leases due, however many tags it owns. A server may
// own thousands (a sequence per conversation); a goroutine and a
// transaction per tag per renewal would grow with them.
//
// Each ownership is renewed every third of the lease. When one is due, the
// others due within half of that go along, so that the ownerships fall
// into step and a round renews them all. A renewal that fails is tried
// again sooner; meanwhile the deadline stands, and the ownership ends
// there. A lease found lost ends at once.
//
// A batch fails as a whole when one of its rows cannot be had (a peer
// stopped while it held the row's lock, a store call that hangs): the
// leases of a failed batch are retried each on its own (RenewTag, a few at
// a time), so that one bad row costs its own lease, not its batch's, and
// go back to batches once renewed. Every call is bounded by half the
// renewal interval, so that a hung one leaves the retries time.
type renewer struct {
	t    *Tags
	wake chan struct{} // the first ownership was added
	mu   sync.Mutex
	due  map[*ownership]slot
}

// slot is an ownership's next renewal: when (t.mono()), and whether on its
// own, after its batch failed.
type slot struct {
	at   int64
	solo bool
}

func newRenewer(t *Tags) *renewer {
	return &renewer{t: t, wake: make(chan struct{}, 1), due: map[*ownership]slot{}}
}

// every is the interval between the renewals of one lease.
func (r *renewer) every() int64 { return int64(r.t.s.OwnerLease / 3) }

// retryIn is how soon a failed renewal is tried again.
func (r *renewer) retryIn() int64 { return max(r.every()/4, int64(minLeaseCache)) }

// callTimeout bounds one store call.
func (r *renewer) callTimeout() time.Duration {
	return min(r.t.s.StoreTimeout, time.Duration(r.every()/2))
}

// add schedules the renewals of a new ownership.
func (r *renewer) add(w *ownership) {
	r.mu.Lock()
	r.due[w] = slot{at: r.t.mono() + r.every()}
	// Every other renewal is due no later than this one: the timer only
	// needs setting when there was none.
	first := len(r.due) == 1
	r.mu.Unlock()
	if first {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// run renews until the generator starts to close.
func (r *renewer) run() {
	t := r.t
	defer t.wg.Done()
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	defer tm.Stop()
	for {
		batch, solo, next := r.dueNow()
		if len(batch)+len(solo) > 0 {
			if !r.renew(batch, solo) {
				return
			}
			continue
		}
		if next != math.MaxInt64 {
			tm.Reset(time.Duration(next - t.mono()))
		}
		select {
		case <-t.done:
			return
		case <-r.wake:
		case <-tm.C:
		}
	}
}

// dueNow returns the ownerships to renew now, in batches or on their own,
// none unless one is due, and otherwise when the next one is; it forgets
// those that ended.
func (r *renewer) dueNow() (batch, solo []*ownership, next int64) {
	now := r.t.mono()
	ahead := now + r.every()/2
	next = math.MaxInt64
	r.mu.Lock()
	defer r.mu.Unlock()
	for w, s := range r.due {
		if w.ended() {
			delete(r.due, w)
			continue
		}
		next = min(next, s.at)
		switch {
		case s.at > ahead:
		case s.solo:
			solo = append(solo, w)
		default:
			batch = append(batch, w)
		}
	}
	if next > now {
		return nil, nil, next
	}
	return batch, solo, next
}

// schedule sets w's next renewal, unless it was forgotten.
func (r *renewer) schedule(w *ownership, s slot) {
	r.mu.Lock()
	if _, ok := r.due[w]; ok {
		r.due[w] = s
	}
	r.mu.Unlock()
}

// renew renews solo each on its own, a few at a time, and batch
// leaf.MaxRenewBatch leases per store call. It reports false once the
// generator is closing.
func (r *renewer) renew(batch, solo []*ownership) bool {
	t := r.t
	var (
		mu     sync.Mutex
		failed []string
		why    error
	)
	fail := func(tag string, err error) {
		mu.Lock()
		failed, why = append(failed, tag), err
		mu.Unlock()
	}
	parallel.Run(len(solo), func(i int) {
		w := solo[i]
		sent := t.mono()
		ctx, cancel := context.WithTimeout(t.ctx, r.callTimeout())
		l, err := t.store.RenewTag(ctx, w.o.tag, t.s.Owner, w.token, t.s.OwnerLease)
		cancel()
		if r.apply(w, sent, l, err) {
			fail(w.o.tag, err)
		}
	})
	leases := make([]leaf.TagToken, 0, min(len(batch), leaf.MaxRenewBatch))
	for len(batch) > 0 {
		select {
		case <-t.done:
			return false
		default:
		}
		chunk := batch[:min(len(batch), leaf.MaxRenewBatch)]
		batch = batch[len(chunk):]
		leases = leases[:0]
		for _, w := range chunk {
			leases = append(leases, leaf.TagToken{Tag: w.o.tag, Token: w.token})
		}
		sent := t.mono()
		ctx, cancel := context.WithTimeout(t.ctx, r.callTimeout())
		res, err := t.store.RenewTags(ctx, t.s.Owner, leases, t.s.OwnerLease)
		cancel()
		if err == nil && len(res) != len(chunk) {
			err = fmt.Errorf("the store answered %d renewals for %d leases", len(res), len(chunk))
		}
		for i, w := range chunk {
			var l leaf.TagLease
			e := err
			if err == nil {
				l, e = res[i].Lease, res[i].Err
			}
			if r.apply(w, sent, l, e) {
				fail(w.o.tag, e)
			}
		}
	}
	if len(failed) > 0 {
		// One line per round, not per tag: a store that is down fails
		// every lease at once.
		t.s.Logger.Warn("segment ordered tags: lease renewal failed; retrying, and each tag stops issuing when its lease runs out",
			"tags", len(failed), "first", failed[0], "retry_in", time.Duration(r.retryIn()), "err", why)
	}
	select {
	case <-t.done:
		return false
	default:
		return true
	}
}

// apply takes one lease's renewal, sent at sent: the lease, or the error.
// It reports a failure to try again, which the next try makes on its own.
func (r *renewer) apply(w *ownership, sent int64, l leaf.TagLease, err error) (retry bool) {
	t, o := r.t, w.o
	switch {
	case errors.Is(err, leaf.ErrLeaseLost):
		w.lost(err)
	case err != nil:
		if t.mono() >= w.deadline.Load() {
			if w.end() {
				t.s.Logger.Error("segment ordered tag: lease could not be renewed before it ran out; stopped issuing", "tag", o.tag, "token", w.token, "err", err)
			}
			return false
		}
		r.schedule(w, slot{at: t.mono() + r.retryIn(), solo: true})
		return true
	default:
		w.extend(sent + int64(l.Left-t.leaseMargin()))
		o.mu.Lock()
		o.observeLocked(l, sent, t.mono())
		o.mu.Unlock()
		r.schedule(w, slot{at: sent + r.every()})
	}
	return false
}
