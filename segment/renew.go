package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/leafgo/leaf"
)

// renewer renews the leases of the ordered tags this generator owns: one
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
type renewer struct {
	g    *Generator
	wake chan struct{} // an ownership was added: its renewal may be the next
	mu   sync.Mutex
	due  map[*ownership]int64 // g.mono() at which each is to be renewed
}

func newRenewer(g *Generator) *renewer {
	return &renewer{g: g, wake: make(chan struct{}, 1), due: map[*ownership]int64{}}
}

// every is the interval between the renewals of one lease.
func (r *renewer) every() int64 { return int64(r.g.s.OwnerLease / 3) }

// retryIn is how soon a failed renewal is tried again.
func (r *renewer) retryIn() int64 { return max(r.every()/4, int64(minLeaseCache)) }

// add schedules the renewals of a new ownership.
func (r *renewer) add(w *ownership) {
	r.mu.Lock()
	r.due[w] = r.g.mono() + r.every()
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run renews until the generator closes.
func (r *renewer) run() {
	g := r.g
	defer g.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		batch, next := r.dueNow()
		if len(batch) > 0 {
			r.renew(batch)
			continue
		}
		if next != math.MaxInt64 {
			t.Reset(time.Duration(next - g.mono()))
		}
		select {
		case <-g.done:
			return
		case <-r.wake:
		case <-t.C:
		}
	}
}

// dueNow returns the ownerships to renew now, none unless one is due, and
// otherwise when the next one is; it forgets those that ended.
func (r *renewer) dueNow() (batch []*ownership, next int64) {
	now := r.g.mono()
	ahead := now + r.every()/2
	next = math.MaxInt64
	r.mu.Lock()
	defer r.mu.Unlock()
	for w, d := range r.due {
		if w.ended() {
			delete(r.due, w)
			continue
		}
		next = min(next, d)
		if d <= ahead {
			batch = append(batch, w)
		}
	}
	if next > now {
		return nil, next
	}
	return batch, next
}

// schedule sets w's next renewal, unless it was forgotten.
func (r *renewer) schedule(w *ownership, at int64) {
	r.mu.Lock()
	if _, ok := r.due[w]; ok {
		r.due[w] = at
	}
	r.mu.Unlock()
}

// renew renews batch, leaf.MaxRenewBatch leases per store call.
func (r *renewer) renew(batch []*ownership) {
	g := r.g
	leases := make([]leaf.TagToken, 0, min(len(batch), leaf.MaxRenewBatch))
	for len(batch) > 0 {
		select {
		case <-g.done:
			return
		default:
		}
		chunk := batch[:min(len(batch), leaf.MaxRenewBatch)]
		batch = batch[len(chunk):]
		leases = leases[:0]
		for _, w := range chunk {
			leases = append(leases, leaf.TagToken{Tag: w.o.tag, Token: w.token})
		}
		sent := g.mono()
		ctx, cancel := context.WithTimeout(g.ctx, min(g.s.StoreTimeout, g.s.OwnerLease))
		res, err := g.ordered.RenewTags(ctx, g.s.Owner, leases, g.s.OwnerLease)
		cancel()
		if err == nil && len(res) != len(chunk) {
			err = fmt.Errorf("the store answered %d renewals for %d leases", len(res), len(chunk))
		}
		var failed []string
		var why error
		for i, w := range chunk {
			var l leaf.TagLease
			e := err
			if err == nil {
				l, e = res[i].Lease, res[i].Err
			}
			if r.apply(w, sent, l, e) {
				failed = append(failed, w.o.tag)
				why = e
			}
		}
		if len(failed) > 0 {
			// One line per call, not per tag: a store that is down fails
			// every lease at once.
			g.s.Logger.Warn("segment ordered tags: lease renewal failed; retrying, and each tag stops issuing when its lease runs out",
				"tags", len(failed), "first", failed[0], "retry_in", time.Duration(r.retryIn()), "err", why)
		}
	}
}

// apply takes one lease's renewal, sent at sent: the lease, or the error.
// It reports a failure to try again.
func (r *renewer) apply(w *ownership, sent int64, l leaf.TagLease, err error) (retry bool) {
	g, o := r.g, w.o
	switch {
	case errors.Is(err, leaf.ErrLeaseLost):
		if w.end() {
			g.s.Logger.Error("segment ordered tag: lease lost; stopped issuing", "tag", o.tag, "token", w.token, "err", err)
		}
	case err != nil:
		if g.mono() >= w.deadline.Load() {
			if w.end() {
				g.s.Logger.Error("segment ordered tag: lease could not be renewed before it ran out; stopped issuing", "tag", o.tag, "token", w.token, "err", err)
			}
			return false
		}
		r.schedule(w, g.mono()+r.retryIn())
		return true
	default:
		w.extend(sent + int64(l.Left-g.leaseMargin()))
		o.mu.Lock()
		o.seen, o.seenAt = l, sent
		o.mu.Unlock()
		r.schedule(w, sent+r.every())
	}
	return false
}
