package snowflake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/leafgo/leaf"
)

// A grant is what the worker allows the issuer to stamp, published whole
// and never modified, so that the issuer reads it with one atomic load and
// every ID it issues obeys one consistent grant.
type grant struct {
	worker int64 // the worker ID to stamp
	// floor: IDs stamped before this Unix ms may exist under this worker ID
	// (the claim's high-water mark); the issuer starts at it.
	floor int64
	// limit: no ID is stamped at or after this Unix ms: the last high-water
	// mark persisted, capped at the layout's end.
	limit int64
	// leased: no ID is stamped at or after leaseEnd, the lease's expiry
	// less a margin. It is compared with the clock's monotonic reading (when
	// the clock is the real one), so a wall clock stepping back cannot
	// stretch it.
	leased   bool
	leaseEnd time.Time
	// stop, when set, is why nothing may be issued at all: the generator is
	// closed, or the worker ID lost.
	stop error
}

var (
	errClosed = fmt.Errorf("snowflake generator: %w", leaf.ErrClosed)
	errLost   = fmt.Errorf("%w: the worker ID was lost (lease expired or taken over); re-registering", leaf.ErrWorkerLost)
	// errLimit: an ID would reach the grant's limit; the issuer asks the
	// source to extend it.
	errLimit = errors.New("high-water mark reached")
)

// grantSource is what the issuer needs of the worker: the current grant,
// and a way to ask for more room when an ID reaches the grant's limit.
type grantSource interface {
	// current returns the grant in force; never nil.
	current() *grant
	// extend moves the limit ahead of the clock, or says why it cannot;
	// it must not wait longer than ctx allows.
	extend(ctx context.Context) error
}

// issuer hands out IDs within the grants of its source. It owns the
// sequence: one mutex guards it, and at 12 sequence bits the clock, not the
// lock, limits throughput (4,096,000 IDs/s).
type issuer struct {
	layout       Layout
	maxSeq       int64
	randomStart  bool
	maxBackwards time.Duration
	now          func() time.Time
	log          *slog.Logger
	src          grantSource

	mu        sync.Mutex
	last      int64 // Unix ms of the last ID issued (or the floor a grant imposes)
	seq       int64 // sequence of the last ID issued
	exhausted bool  // the last millisecond ran out of sequence: start the next at 0
	inRoll    bool  // currently behind the last issued ID
	stats     issueStats
}

// issueStats are the issuer's part of leaf.WorkerStatus.
type issueStats struct {
	issued                               uint64
	rollbacks, maxRollbackMs, rollbackMs int64
}

func newIssuer(s Config, src grantSource) *issuer {
	return &issuer{
		layout:       s.Layout,
		maxSeq:       s.Layout.MaxSequence(),
		randomStart:  s.RandomStart,
		maxBackwards: s.MaxBackwards,
		now:          s.Now,
		log:          s.Logger,
		src:          src,
	}
}

// nextID issues one ID.
func (is *issuer) nextID(ctx context.Context) (int64, error) {
	// The clock is read under the lock: read before it, a reading could be
	// older than the last ID by the time the lock is ours, a false rollback.
	is.mu.Lock()
	t := is.now()
	id, err := is.next(is.src.current(), t, t.UnixMilli())
	is.mu.Unlock()
	if err == nil {
		return id, nil
	}
	var one [1]int64
	ids, err := is.fill(ctx, one[:0], 1, err)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// Bounds of one request's waits: small rollbacks are waited out for at most
// waitBudget in all (a clock stepping back again and again is not waited on
// for ever), and an exhausted high-water mark is extended at most
// maxExtends times, each waiting for the registry at most extendBudget.
const (
	waitBudget   = time.Second
	maxExtends   = 3
	extendBudget = time.Second
)

// fill issues IDs until dst holds want of them. prev is the error that
// stopped a fast path already, if any. A batch that fails part way returns
// dst as it came; the IDs it had issued are never issued again.
func (is *issuer) fill(ctx context.Context, dst []int64, want int, prev error) ([]int64, error) {
	start := len(dst)
	err := prev
	var waited time.Duration
	extends := 0
	for {
		if err != nil {
			var wb *waitBackwards
			var used *msUsedUp
			switch {
			case errors.As(err, &wb):
				if waited += wb.d; waited > waitBudget {
					return dst[:start], fmt.Errorf("%w: it kept stepping back for over %v", leaf.ErrClockBackwards, waitBudget)
				}
				if serr := sleep(ctx, wb.d); serr != nil {
					return dst[:start], serr
				}
			case errors.As(err, &used):
				if werr := is.waitPast(used.ms); werr != nil {
					return dst[:start], werr
				}
				// Less than a millisecond, as the spin under the lock it
				// replaces: no reason to fail a request that is late already.
				err = nil
				continue
			case errors.Is(err, errLimit):
				if extends++; extends > maxExtends {
					return dst[:start], fmt.Errorf("%w: the high-water mark does not keep ahead of the clock", leaf.ErrNotReady)
				}
				ectx, cancel := context.WithTimeout(ctx, extendBudget)
				herr := is.src.extend(ectx)
				cancel()
				if herr != nil {
					return dst[:start], fmt.Errorf("%w: cannot persist the high-water mark ahead of the clock: %w", leaf.ErrNotReady, herr)
				}
			default:
				return dst[:start], err
			}
			// A wait that outlived the caller's deadline serves no one.
			if cerr := ctx.Err(); cerr != nil {
				return dst[:start], fmt.Errorf("%w: %w", leaf.ErrNotReady, cerr)
			}
		}
		// One clock reading and one grant serve a run of IDs up to the end
		// of its millisecond's sequence; the lock is not held across
		// milliseconds.
		is.mu.Lock()
		t := is.now()
		ms := t.UnixMilli()
		gr := is.src.current()
		err = nil
		for len(dst) < want {
			var id int64
			if id, err = is.next(gr, t, ms); err != nil {
				break
			}
			dst = append(dst, id)
		}
		is.mu.Unlock()
		if err == nil {
			return dst, nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// msUsedUp is returned by next when the sequence of millisecond ms is used
// up: the caller waits for the next millisecond without the lock, so that a
// large batch does not keep every other request waiting while the clock
// advances (a batch of 10,000 spans at least three milliseconds).
type msUsedUp struct{ ms int64 }

func (u *msUsedUp) Error() string { return "the sequence of " + fmtMs(u.ms) + " is used up" }

// waitPast waits, without the lock, until the clock leaves millisecond ms
// (forward, or back: next then deals with the rollback). It yields rather
// than sleeps: time.Sleep wakes no sooner than ~1.1ms here, which would cost
// a saturated worker a millisecond of sequence at every boundary, while a
// yield loop costs this goroutine's CPU for the rest of one millisecond at
// most and holds nothing another request needs. A clock that does not
// advance at all (a stuck clock, Leaf#153) is given up on after waitBudget.
func (is *issuer) waitPast(ms int64) error {
	began := time.Now()
	for i := 0; is.now().UnixMilli() == ms; i++ {
		if i%64 == 63 && time.Since(began) > waitBudget {
			return fmt.Errorf("%w: the clock has not advanced past %s", leaf.ErrNotReady, fmtMs(ms))
		}
		runtime.Gosched()
	}
	return nil
}

// waitBackwards is returned by next when the clock is behind the last ID by
// at most MaxBackwards: the caller waits d and tries again.
type waitBackwards struct{ d time.Duration }

func (w *waitBackwards) Error() string { return "clock behind by " + w.d.String() }

// next issues one ID stamped now (t's millisecond) within grant gr, or says
// why it cannot: msUsedUp when that millisecond's sequence is used up,
// errLimit when the grant's limit is reached. Caller holds mu.
func (is *issuer) next(gr *grant, t time.Time, now int64) (int64, error) {
	if gr.stop != nil {
		return 0, gr.stop
	}
	if gr.leased && !t.Before(gr.leaseEnd) {
		return 0, is.limitError(now)
	}
	if floor := gr.floor - 1; floor > is.last {
		// A claim's mark: the floor millisecond itself is not ours.
		is.last, is.seq = floor, is.maxSeq
	}
	if now < is.last {
		back := is.last - now
		if !is.inRoll {
			is.inRoll = true
			is.stats.rollbacks++
			is.stats.maxRollbackMs = max(is.stats.maxRollbackMs, back)
			is.stats.rollbackMs += back
			is.log.Warn("snowflake clock moved backwards", "by_ms", back, "worker_id", gr.worker)
		}
		if time.Duration(back)*time.Millisecond <= is.maxBackwards {
			return 0, &waitBackwards{time.Duration(back) * time.Millisecond}
		}
		return 0, fmt.Errorf("%w: by %dms, more than the %v waited out; no IDs until the clock passes %s",
			leaf.ErrClockBackwards, back, is.maxBackwards, fmtMs(is.last))
	}
	is.inRoll = false
	if now >= gr.limit {
		return 0, is.limitError(now)
	}
	if now == is.last {
		if is.seq < is.maxSeq {
			is.seq++
			return is.issue(gr, now), nil
		}
		is.exhausted = true
		return 0, &msUsedUp{now}
	}
	// A new millisecond. After a used-up one, traffic is saturating: start
	// at 0 and keep the whole sequence space; otherwise a random start
	// spreads IDs for id%n sharding, as Leaf does.
	is.seq = 0
	if !is.exhausted && is.randomStart {
		is.seq = rand.Int64N(min(100, is.maxSeq+1))
	}
	is.exhausted = false
	is.last = now
	return is.issue(gr, now), nil
}

func (is *issuer) issue(gr *grant, now int64) int64 {
	is.stats.issued++
	return is.layout.compose(now, gr.worker, is.seq)
}

// limitError says why no ID may be stamped at now within a grant that has
// not stopped issuing.
func (is *issuer) limitError(now int64) error {
	if end := is.layout.End(); now >= end {
		return fmt.Errorf("%w: the clock (%s) is past the layout's end (%s)", leaf.ErrNotReady, fmtMs(now), fmtMs(end))
	}
	return errLimit
}

// lastMs returns the millisecond of the last ID issued (or the floor of a
// grant applied). Taking the lock makes it a barrier: a run of IDs that
// loaded an earlier grant has finished when it returns, so once a grant
// that stops issuing is published, what it returns is final.
func (is *issuer) lastMs() int64 {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.last
}

// issuedCount is the number of IDs issued since start.
func (is *issuer) issuedCount() uint64 {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.stats.issued
}

// status fills the issuer's part of st.
func (is *issuer) status(st *leaf.WorkerStatus) {
	is.mu.Lock()
	defer is.mu.Unlock()
	st.Issued = is.stats.issued
	st.Rollbacks, st.MaxRollbackMs, st.RollbackMs = is.stats.rollbacks, is.stats.maxRollbackMs, is.stats.rollbackMs
	if is.stats.issued > 0 {
		st.LastIssued = is.last
	}
}

// degraded is the issuer's reason the worker is not healthy; empty when
// the clock is not behind the last ID.
func (is *issuer) degraded() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	if !is.inRoll {
		return ""
	}
	return fmt.Sprintf("snowflake clock is behind the last issued ID (%s)", fmtMs(is.last))
}
