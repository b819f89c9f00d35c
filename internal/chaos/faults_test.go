package chaos

import (
	"context"
	"fmt"
	"time"
)

// The fault schedule. Faults run one after another, so each assertion can
// name its cause: the database outage has no server crash in it (its
// requests must all succeed from the buffers), the clock step has one
// server to blame for its 503s.
const (
	dbDownFor       = 5 * time.Second
	registryDownFor = 5 * time.Second
	clockStep       = -3 * time.Second // the snowflake window: a restart would have to wait it out
	clockStepFor    = 5 * time.Second
	// killCycle is what a crash and restart usually take (a restart on the
	// worker cache waits out up to the 3 s window); no crash starts closer
	// than this to the next big fault. A longer one delays that fault.
	killCycle = 4 * time.Second
	// dbQuiet is the time without crashes before the database goes down: a
	// restarted server reserves its first two ranges within a second of
	// its first requests, and the outage must find every buffer loaded.
	dbQuiet = 4 * time.Second
	// storeRetryMax is the segment generator's longest pause between
	// retries of a failed load (segment.Config.MaxRetryBackoff): a server
	// may take this long after the database is back to notice.
	storeRetryMax = 2 * time.Second
	// ownerLease is the servers' segment.owner_lease: a killed owner's
	// ordered tag fails for up to this long before another server takes
	// it over. Short, so that takeovers happen between the faults.
	ownerLease = 3 * time.Second
	// ownerGrace is how long after a lease could have run out the ordered
	// tag may still fail: a server reads the lease again at most a second
	// after it last did, and a request waits up to segment.wait_timeout
	// (1 s) for the new owner's first range.
	ownerGrace = 2 * time.Second
)

// fault is one injected fault, for the summary.
type fault struct {
	kind   string
	target string
	span   span
	note   string
}

func (r *run) addFault(f fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

// chaos injects the faults while the load that began at loadStart runs,
// and returns when the last one is over and every server serves again.
func (r *run) chaos(ctx context.Context, loadStart time.Duration) {
	d := r.duration
	big := []struct {
		at, quiet time.Duration
		inject    func(context.Context)
	}{
		{loadStart + d*3/10, dbQuiet, r.dbOutage},
		{loadStart + d*55/100, time.Second, r.clockStepBack},
		{loadStart + d*8/10, time.Second, r.registryOutage},
		{loadStart + d - time.Second, 0, nil}, // the end: the last crash is over by then
	}
	crashes := 0
	for _, b := range big {
		for ctx.Err() == nil {
			gap := 1500*time.Millisecond + r.jitter(1500*time.Millisecond)
			if r.now()+gap+killCycle > b.at-b.quiet {
				break
			}
			sleep(ctx, gap)
			// Every other crash kills the ordered tag's owner, so that
			// the run sees takeovers from a dead owner, not only from
			// the database outage.
			victim, why := r.servers[r.rng.IntN(len(r.servers))], ""
			if crashes%2 == 0 {
				if o := r.owner(ctx); o != nil {
					victim, why = o, " (owner of "+tags[orderedTag].name+")"
				}
			}
			crashes++
			r.crashAndRestart(ctx, victim, 500*time.Millisecond+r.jitter(time.Second), why)
		}
		if b.inject == nil || ctx.Err() != nil {
			return
		}
		sleep(ctx, b.at-r.now())
		b.inject(ctx)
	}
}

// owner is the server that owns the ordered tag, as the first server up
// that answers says; nil in a run without it, or when no lease holds.
func (r *run) owner(ctx context.Context) *leafServer {
	if !r.ordered {
		return nil
	}
	for _, s := range r.servers {
		if !s.up.Load() {
			continue
		}
		url, err := s.tagOwner(ctx, tags[orderedTag].name)
		if err != nil {
			r.logf("ask %s for the owner of %s: %v", s.name, tags[orderedTag].name, err)
			continue
		}
		if url == "" {
			r.logf("no server holds the lease of %s; killing another", tags[orderedTag].name)
			return nil
		}
		for _, o := range r.servers {
			if url == "http://"+o.addr {
				return o
			}
		}
		r.logf("%s owned by %q: none of the servers; killing another", tags[orderedTag].name, url)
		return nil
	}
	return nil
}

func (r *run) jitter(d time.Duration) time.Duration { return time.Duration(r.rng.Int64N(int64(d))) }

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// crashAndRestart kills a server with SIGKILL, leaves it down for a while
// and starts it again, as often as it takes: serve exits when it cannot
// reach what it needs at start-up, and an operator's supervisor would
// restart it.
func (r *run) crashAndRestart(ctx context.Context, s *leafServer, down time.Duration, why string) {
	from := r.now()
	r.logf("kill -9 %s%s", s.name, why)
	s.crash(r.now)
	sleep(ctx, down)
	failed := r.restart(ctx, s)
	note := fmt.Sprintf("down %.1fs", (r.now() - from).Seconds())
	if failed > 0 {
		note += fmt.Sprintf(", %d failed start(s)", failed)
	}
	if why != "" {
		note += why
	}
	r.addFault(fault{kind: "leaf kill -9 + restart", target: s.name, span: span{from, r.now()}, note: note})
}

// restart starts s until it serves, one second between attempts, and
// returns the number of attempts that failed.
func (r *run) restart(ctx context.Context, s *leafServer) int {
	for failed := 0; ; failed++ {
		err := s.launch(ctx, r.now)
		if err == nil || ctx.Err() != nil {
			if err == nil {
				r.logf("%s serves again", s.name)
			}
			return failed
		}
		r.logf("%s did not start (attempt %d): %v", s.name, failed+1, err)
		sleep(ctx, time.Second)
	}
}

// waitAllUp waits until every server has served for at least settled.
func (r *run) waitAllUp(ctx context.Context, settled time.Duration) {
	for ctx.Err() == nil {
		all, lastUp := true, time.Duration(0)
		for _, s := range r.servers {
			all = all && s.up.Load()
			lastUp = max(lastUp, s.lastUp())
		}
		if all && r.now()-lastUp >= settled {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// dbOutage kills mariadbd and starts it again on the same data directory.
// No server is crashed meanwhile: every segment request must be answered
// from the buffers.
func (r *run) dbOutage(ctx context.Context) {
	r.waitAllUp(ctx, dbQuiet)
	from := r.now()
	r.logf("kill -9 mariadbd for %v", dbDownFor)
	r.db.kill()
	sleep(ctx, dbDownFor)
	restartAt := r.now()
	if err := r.db.up(ctx); err != nil {
		r.t.Errorf("mariadbd did not come back: %v", err)
	}
	answering := r.now()
	r.logf("mariadbd answers again")
	r.addFault(fault{kind: "mariadb kill -9 + restart", target: "mariadbd", span: span{from, answering},
		note: fmt.Sprintf("down %.1fs, answering %.1fs after its restart", (restartAt - from).Seconds(), (answering - restartAt).Seconds())})
	// The servers are without a store until their next retry after this,
	// and no server may be crashed before the window closes.
	sleep(ctx, storeRetryMax)
	r.mu.Lock()
	r.dbDown = span{from, r.now()}
	r.mu.Unlock()
}

// clockStepBack steps one server's snowflake clock back and, a while later,
// forward again.
func (r *run) clockStepBack(ctx context.Context) {
	r.waitAllUp(ctx, 0)
	s := r.servers[r.rng.IntN(len(r.servers))]
	r.logf("step %s's clock by %v for %v", s.name, clockStep, clockStepFor)
	if err := s.setClock(clockStep); err != nil {
		r.t.Errorf("step the clock: %v", err)
		return
	}
	from := r.now()
	sleep(ctx, clockStepFor)
	if err := s.setClock(0); err != nil {
		r.t.Errorf("restore the clock: %v", err)
	}
	to := r.now()
	r.logf("%s's clock restored", s.name)
	r.mu.Lock()
	r.clockServer, r.clockSpan = s.idx, span{from, to}
	r.mu.Unlock()
	r.addFault(fault{kind: "clock step", target: s.name, span: span{from, to},
		note: fmt.Sprintf("%v for %v", clockStep, clockStepFor)})
}

// registryOutage kills the registry and starts it again on the same data.
// A server is crashed in the middle of it, so that one restart has to do
// without the registry.
func (r *run) registryOutage(ctx context.Context) {
	r.waitAllUp(ctx, 0)
	from := r.now()
	name := r.reg.name
	r.logf("kill -9 %s for %v", name, registryDownFor)
	r.reg.kill()
	victim := r.servers[r.rng.IntN(len(r.servers))]
	crashed := make(chan struct{})
	go func() {
		defer close(crashed)
		sleep(ctx, time.Second)
		r.crashAndRestart(ctx, victim, 500*time.Millisecond, " (during the "+name+" outage)")
	}()
	sleep(ctx, registryDownFor-(r.now()-from))
	restartAt := r.now()
	if err := r.reg.up(ctx); err != nil {
		r.t.Errorf("%s did not come back: %v", name, err)
	}
	answering := r.now()
	r.logf("%s answers again", name)
	r.mu.Lock()
	r.regDown = span{from, answering}
	r.mu.Unlock()
	r.addFault(fault{kind: name + " kill -9 + restart", target: name, span: span{from, answering},
		note: fmt.Sprintf("down %.1fs, answering %.1fs after its restart", (restartAt - from).Seconds(), (answering - restartAt).Seconds())})
	<-crashed
}
