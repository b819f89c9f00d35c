package forward

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
)

// tagQueue is the requests of one tag waiting for its owner, and the one
// call in flight for them.
type tagQueue struct {
	f   *Forwarder
	tag string

	mu sync.Mutex
	// waiting is the queue, in arrival order. Only fly removes from it,
	// and only from the front; take appends.
	waiting []*waiter
	flying  bool // a fly goroutine runs: it makes the calls
}

// waiter is one request in the queue. Until done is closed, the fields
// after deadline belong to fly.
type waiter struct {
	url      string // the owner the request was sent to
	n        int
	deadline time.Time
	done     chan struct{}
	gone     atomic.Bool // the request stopped waiting

	got  int   // IDs handed to it so far
	runs []run // the IDs: consecutive runs, in increasing order
	err  error
}

type run struct{ start, end int64 }

// take queues a request for n IDs at the owner url and waits, until ctx is
// done or deadline, for the calls that bring them; it appends them to dst.
// A context that cannot end (Done is nil) is not watched: fly releases
// the request by its deadline, and no call runs past it.
func (q *tagQueue) take(ctx context.Context, deadline time.Time, url string, n int, dst []int64) ([]int64, error) {
	w := &waiter{url: url, n: n, deadline: deadline, done: make(chan struct{})}
	q.mu.Lock()
	if len(q.waiting) >= q.f.maxQueue {
		q.mu.Unlock()
		return nil, fmt.Errorf("%w: tag %s: %d requests wait", leaf.ErrOwnerBusy, q.tag, q.f.maxQueue)
	}
	q.waiting = append(q.waiting, w)
	if !q.flying {
		q.flying = true
		go q.fly()
	}
	q.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done(): // never, for a context that cannot end
		w.gone.Store(true)
		select {
		case <-w.done: // answered meanwhile: take it
		default:
			return nil, fmt.Errorf("%w: tag %s: waiting for the owner %s: %w", leaf.ErrOwnerUnreachable, q.tag, url, ctx.Err())
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	for _, r := range w.runs {
		for id := r.start; id < r.end; id++ {
			dst = append(dst, id)
		}
	}
	return dst, nil
}

// fly makes the calls of the queue, one at a time, until it is empty.
// Each asks for what the requests at the front of the queue still need,
// those sent to the same owner, up to leaf.MaxRange IDs; the range it
// brings back is handed out in queue order. A request that is only partly
// served (the owner's range ended with its segment) stays at the front for
// the next call.
func (q *tagQueue) fly() {
	var batch []*waiter
	for {
		// Let the handlers already running on this P queue their
		// requests before the batch is cut: at 32 clients this raised
		// the requests per call from about 9 to 12 (fewer calls, less
		// CPU per ID), at the cost of one yield per call.
		runtime.Gosched()
		q.mu.Lock()
		q.dropGoneLocked()
		if len(q.waiting) == 0 {
			q.flying = false
			// An idle tag keeps no queue: the tags forwarded over a
			// process's life do not pile up. A request that found this
			// queue before it left the map is still served: it starts
			// a fly of its own.
			q.f.queues.CompareAndDelete(q.tag, q)
			q.mu.Unlock()
			return
		}
		url := q.waiting[0].url
		batch = batch[:0]
		need := 0
		// The call ends by the first deadline of its requests: none is
		// held past its own, and the others ask again within theirs.
		deadline := q.waiting[0].deadline
		for _, w := range q.waiting {
			k := w.n - w.got
			if w.url != url || need+k > leaf.MaxRange {
				break
			}
			need += k
			batch = append(batch, w)
			if w.deadline.Before(deadline) {
				deadline = w.deadline
			}
		}
		q.mu.Unlock()

		start, end, err := q.f.call(url, q.tag, need, deadline)

		q.mu.Lock()
		served := 0 // batch is a prefix of waiting: only take appends
		if err != nil {
			for _, w := range batch {
				w.err = err
				close(w.done)
			}
			served = len(batch)
		} else {
			for _, w := range batch {
				k := min(int64(w.n-w.got), end-start)
				if k <= 0 {
					break
				}
				w.runs = append(w.runs, run{start, start + k})
				w.got += int(k)
				start += k
				if w.got < w.n {
					break
				}
				close(w.done)
				served++
			}
			q.f.forwarded.Add(uint64(served))
		}
		clear(q.waiting[:served])
		q.waiting = q.waiting[served:]
		q.mu.Unlock()
	}
}

// dropGoneLocked removes the requests that stopped waiting, and fails
// those whose deadline has passed: nothing is asked for them. IDs already
// handed to one are skipped.
func (q *tagQueue) dropGoneLocked() {
	kept := q.waiting[:0]
	now := time.Now()
	for _, w := range q.waiting {
		switch {
		case w.gone.Load():
		case !w.deadline.After(now):
			w.err = fmt.Errorf("%w: tag %s: waiting for the owner %s: %w", leaf.ErrOwnerUnreachable, q.tag, w.url, context.DeadlineExceeded)
			close(w.done)
		default:
			kept = append(kept, w)
		}
	}
	clear(q.waiting[len(kept):])
	q.waiting = kept
}
