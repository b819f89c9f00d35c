// Package forward passes a server's requests for an ordered tag it does
// not own to the server that does.
//
// An ordered tag's IDs are issued by one server at a time, its owner (see
// leaf.OrderedStore); the segment generator of any other server answers a
// *leaf.NotOwnerError naming the owner's URL. A Forwarder sits in front of
// the generator: a request the generator serves is answered as it was, one
// it does not own goes to the owner as
//
//	POST {owner}/v2/segment/{tag}/range?count=N
//	Leaf-Forward: 1
//	Authorization: Bearer TOKEN   (when the servers have an admin token)
//
// which the owner serves from its ordered sequence (httpapi, with the
// generator's Take by leaf.ByForwarder) and never forwards again: a server that is
// not the owner answers it 409 or 503, and the forwarder asks its own
// generator for the owner anew. The call is package client's NextRange, one
// attempt to one server: the /v2 API has one client, whose answer checks
// and error table the forwarder shares.
//
// Batching. Requests for one tag queue, in arrival order; one call per tag
// is in flight at a time, asking for the sum of the counts queued when it
// is sent (up to leaf.MaxRange), and the range it brings back is handed out
// in queue order. A request that arrives while a call is in flight waits
// for the next one: it never gets IDs from a call sent before it arrived,
// so a request that starts after another's answer gets larger IDs, as on
// the owner itself. The queue is bounded (Config.MaxQueue); over it a
// request fails at once with leaf.ErrOwnerBusy.
//
// Failures. A request waits at most Config.Wait (its context may end it
// sooner). Within it, an owner that does not answer, or says it is not the
// owner, is asked again after a short pause, the generator consulted each
// time: when a dead owner's lease runs out the generator takes the tag
// over, or names the server that did. With no live owner and no takeover
// due within the wait, the generator's *leaf.NotOwnerError is returned (it
// says when to retry); with an owner that never answered, an error
// matching leaf.ErrOwnerUnreachable. IDs a failed call may have taken on the
// owner are skipped, never issued twice.
package forward

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/backoff"
)

// Header marks a forwarded request. A server answers it from its own
// ordered sequence or refuses it; it never forwards it again.
const Header = "Leaf-Forward"

// OwnerHeader names, on a /v2 answer that was forwarded, the owner's URL:
// a client that knows that server may send the tag's next requests to it
// directly and spare the forward (package client does).
const OwnerHeader = "Leaf-Owner"

// Defaults of Config.
const (
	DefaultWait     = time.Second
	DefaultMaxQueue = 4096
)

// Local is the generator of this server: it issues the IDs of the tags it
// serves and answers a *leaf.NotOwnerError for an ordered tag another
// server owns. *segment.Generator satisfies it.
type Local interface {
	NextIDPeriod(ctx context.Context, tag string) (int64, string, error)
	NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error)
}

// OwnerWatcher wants to hear of a failed forward (package ordered's
// *Tags, Config.Watcher): it then reads the tag's lease from the store
// again rather than answer from what it read up to a second ago, so that
// a takeover or a handover is seen at once.
type OwnerWatcher interface {
	OwnerUnreachable(tag string)
}

// Config configures a Forwarder.
type Config struct {
	// Local is this server's generator. Required.
	Local Local
	// Watcher, if set, hears of each failed forward: the ordered tags
	// of Local (*ordered.Tags).
	Watcher OwnerWatcher
	// Self is this server's owner identity (ordered.Config.Owner:
	// advertise URL, '#', nonce). A lease held under this server's URL by
	// another identity is a previous process of this server, which is
	// gone: it is waited out, never forwarded to.
	Self string
	// Token, when set, is sent as a bearer token with every forwarded
	// request: the owner requires its admin token of them.
	Token string
	// Wait bounds a request whose context has no earlier deadline.
	// Default DefaultWait.
	Wait time.Duration
	// MaxQueue bounds the requests waiting for the owner, per tag.
	// Default DefaultMaxQueue.
	MaxQueue int
	// TLS configures connections to https owners; nil: the system's
	// roots.
	TLS *tls.Config
	// Logger receives a line when an owner stops answering and when it
	// answers again. Nil: slog.Default().
	Logger *slog.Logger
}

// Forwarder answers the ID requests of a server, forwarding those for
// ordered tags it does not own. It is safe for concurrent use.
type Forwarder struct {
	local    Local
	watcher  OwnerWatcher
	self     string
	selfURL  string
	wait     time.Duration
	maxQueue int
	hc       *http.Client    // every owner's: no redirects
	headers  []client.Option // every owner's client's: Leaf-Forward, and the admin token
	log      *slog.Logger

	queues sync.Map // tag → *tagQueue; read on every forwarded request
	mu     sync.Mutex
	owners map[string]*owner

	calls, forwarded, failures atomic.Uint64
}

// owner is the client of one owner URL.
type owner struct {
	url      string
	c        *client.Client
	down     atomic.Bool  // the last call failed to get an answer: logged once per outage
	lastUsed atomic.Int64 // unix nanoseconds of the last call's start
}

// ownerIdle is how long an owner's client is kept unused once more than
// keptOwners are known: owners come and go with the servers (a new pod, a
// new URL), and their clients must not pile up. (Their idle connections
// close on their own, after idleConn.)
const (
	ownerIdle  = 2 * time.Minute
	keptOwners = 16
	idleConn   = time.Minute
)

// DefaultConfig returns the defaults a zero field of Config takes; Local
// has none, and Self, Token and TLS are optional.
func DefaultConfig() Config {
	return Config{Wait: DefaultWait, MaxQueue: DefaultMaxQueue, Logger: slog.Default()}
}

// Validate reports the first field New would refuse, wrapping
// leaf.ErrInvalidArgument.
func (s Config) Validate() error {
	switch {
	case s.Local == nil:
		return fmt.Errorf("forward: %w: no Local generator", leaf.ErrInvalidArgument)
	case s.Wait < 0:
		return fmt.Errorf("forward: %w: Wait %s is negative", leaf.ErrInvalidArgument, s.Wait)
	case s.MaxQueue < 0:
		return fmt.Errorf("forward: %w: MaxQueue %d is negative", leaf.ErrInvalidArgument, s.MaxQueue)
	case strings.ContainsFunc(s.Token, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		// It goes into every forwarded request's Authorization header.
		return fmt.Errorf("forward: %w: Token holds a space, a control character or a byte outside ASCII", leaf.ErrInvalidArgument)
	}
	if s.Self != "" {
		if err := leaf.ValidateOwner(s.Self); err != nil {
			return fmt.Errorf("forward: Self: %w", err)
		}
	}
	return nil
}

// New returns a Forwarder, or Validate's error; it starts nothing.
func New(s Config) (*Forwarder, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	d := DefaultConfig()
	f := &Forwarder{local: s.Local, watcher: s.Watcher, self: s.Self, selfURL: leaf.OwnerURL(s.Self),
		wait: cmp.Or(s.Wait, d.Wait), maxQueue: cmp.Or(s.MaxQueue, d.MaxQueue), log: cmp.Or(s.Logger, d.Logger),
		owners: map[string]*owner{}}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = s.TLS
	// One call per tag is in flight; a few tags at once need a few
	// connections.
	t.MaxIdleConnsPerHost, t.MaxConnsPerHost, t.IdleConnTimeout = 64, 64, idleConn
	// Owners never compress their answers: no Accept-Encoding to send.
	t.DisableCompression = true
	f.headers = []client.Option{client.WithHeader(Header, "1")}
	if s.Token != "" {
		f.headers = append(f.headers, client.WithHeader("Authorization", "Bearer "+s.Token))
	}
	f.hc = &http.Client{
		Transport: t,
		// An owner answers a forwarded request itself or refuses it;
		// a redirect is a refusal (the answer is not 200).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return f, nil
}

// Stats counts a Forwarder's work since it was made.
type Stats struct {
	// Calls is the calls made to owners, Forwarded the requests they
	// answered (a call answers every request of its batch), Failures the
	// calls that failed.
	Calls, Forwarded, Failures uint64
}

// Stats reports the counters.
func (f *Forwarder) Stats() Stats {
	return Stats{Calls: f.calls.Load(), Forwarded: f.forwarded.Load(), Failures: f.failures.Load()}
}

// Close closes the idle connections to owners and logs what was
// forwarded. Requests still waiting end with their calls.
func (f *Forwarder) Close() {
	if st := f.Stats(); st.Calls > 0 {
		f.log.Info("forward: stopped", "calls", st.Calls, "requests_forwarded", st.Forwarded, "failed_calls", st.Failures)
	}
	f.hc.CloseIdleConnections()
}

// NextID issues one ID of tag, here or at its owner.
func (f *Forwarder) NextID(ctx context.Context, tag string) (int64, error) {
	id, _, err := f.NextIDPeriod(ctx, tag)
	return id, err
}

// NextIDPeriod is NextID that names a periodic tag's period; a forwarded
// ID has none (an ordered tag is not periodic).
func (f *Forwarder) NextIDPeriod(ctx context.Context, tag string) (int64, string, error) {
	id, period, _, err := f.NextIDVia(ctx, tag)
	return id, period, err
}

// NextIDVia is NextIDPeriod that also names where the ID came from: the
// owner's URL when it was forwarded there, "" when issued here.
func (f *Forwarder) NextIDVia(ctx context.Context, tag string) (id int64, period, owner string, err error) {
	id, period, err = f.local.NextIDPeriod(ctx, tag)
	if err == nil {
		return id, period, "", nil
	}
	noe, ok := errors.AsType[*leaf.NotOwnerError](err)
	if !ok {
		return id, period, "", err
	}
	var one [1]int64
	ids, owner, err := f.forward(ctx, tag, 1, one[:0], noe)
	if err != nil {
		return 0, "", "", err
	}
	return ids[0], "", owner, nil
}

// NextIDs appends n IDs of tag to dst, here or at its owner.
func (f *Forwarder) NextIDs(ctx context.Context, tag string, n int, dst []int64) ([]int64, error) {
	ids, _, err := f.NextIDsPeriod(ctx, tag, n, dst)
	return ids, err
}

// NextIDsPeriod is NextIDs that names a periodic tag's period.
func (f *Forwarder) NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error) {
	ids, period, _, err := f.NextIDsVia(ctx, tag, n, dst)
	return ids, period, err
}

// NextIDsVia is NextIDsPeriod that also names where the IDs came from, as
// NextIDVia does.
func (f *Forwarder) NextIDsVia(ctx context.Context, tag string, n int, dst []int64) (ids []int64, period, owner string, err error) {
	ids, period, err = f.local.NextIDsPeriod(ctx, tag, n, dst)
	if err == nil {
		return ids, period, "", nil
	}
	noe, ok := errors.AsType[*leaf.NotOwnerError](err)
	if !ok {
		return ids, period, "", err
	}
	ids, owner, err = f.forward(ctx, tag, n, dst, noe)
	return ids, "", owner, err
}

// Pauses between attempts of one request: from firstPause, doubling, up
// to maxPause, and never past a takeover the generator announced.
const (
	firstPause = 5 * time.Millisecond
	maxPause   = 100 * time.Millisecond
)

// forward gets n IDs of tag for a request the generator answered noe: from
// the owner it names (whose URL it answers), or, after a takeover, from the
// generator itself ("").
func (f *Forwarder) forward(ctx context.Context, tag string, n int, dst []int64, noe *leaf.NotOwnerError) ([]int64, string, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(f.wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if ctx.Done() != nil {
		// A context that can end otherwise (a gRPC client going away) is
		// watched, with the deadline. One that cannot (the HTTP routes')
		// costs no timer: the queue releases a request by its deadline.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	pause := firstPause
	var last error // the last call's failure
	for {
		var wait time.Duration
		switch {
		case noe.URL == "":
			// No live owner: a server takes the tag over when the lease
			// runs out. Waiting past the request's budget helps no one:
			// the client is told when to come back.
			if time.Until(deadline) < noe.Retry {
				return nil, "", noe
			}
			wait = max(noe.Retry, firstPause)
		case noe.URL == f.selfURL:
			// A previous process of this server still holds the lease;
			// it is gone, and the lease runs out on its own.
			last = fmt.Errorf("%w: tag %s: the lease is held by an earlier process of this server (%s)", leaf.ErrOwnerUnreachable, tag, noe.Owner)
			wait = pause
		default:
			ids, err := f.queue(tag).take(ctx, deadline, noe.URL, n, dst)
			if err == nil {
				return ids, noe.URL, nil
			}
			if !retryable(err) {
				return nil, "", err
			}
			if w := f.watcher; w != nil {
				w.OwnerUnreachable(tag)
			}
			// A call cut short by the request's deadline says only that
			// time ran out: the failure before it (a refusal, a dead
			// owner) says why, and is the one the caller is told.
			if last == nil || time.Now().Before(deadline) {
				last = err
			}
			wait = pause
		}
		pause = min(2*pause, maxPause)
		if time.Until(deadline) <= wait {
			return nil, "", f.giveUp(tag, last, noe, context.DeadlineExceeded)
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return nil, "", f.giveUp(tag, last, noe, err)
		}
		// The generator knows best who owns the tag now: itself, maybe.
		ids, _, err := f.local.NextIDsPeriod(ctx, tag, n, dst)
		if err == nil {
			return ids, "", nil
		}
		var ok bool
		if noe, ok = errors.AsType[*leaf.NotOwnerError](err); !ok {
			return nil, "", err
		}
	}
}

// giveUp is the error of a request whose wait ended (why: the context's
// error): the last call's failure, or, when there was none, the
// generator's answer.
func (f *Forwarder) giveUp(tag string, last error, noe *leaf.NotOwnerError, why error) error {
	if last == nil {
		if noe.URL == "" {
			return noe
		}
		last = fmt.Errorf("%w: tag %s: owner %s: %w", leaf.ErrOwnerUnreachable, tag, noe.URL, why)
	}
	return last
}

// errNotOwner is an owner's refusal of a forwarded request: it does not
// (or no longer) own the tag. The generator is asked again.
var errNotOwner = errors.New("the server asked is not the owner")

// retryable reports whether a request may try again after err: anything
// but an answer about the tag itself (gone, a bad count) or the queue.
func retryable(err error) bool {
	return !errors.Is(err, leaf.ErrTagNotFound) && !errors.Is(err, leaf.ErrInvalidCount) && !errors.Is(err, leaf.ErrOwnerBusy) &&
		!errors.Is(err, context.Canceled)
}

// queue is tag's queue, made on first use and dropped when it empties.
func (f *Forwarder) queue(tag string) *tagQueue {
	if q, ok := f.queues.Load(tag); ok {
		return q.(*tagQueue)
	}
	q, _ := f.queues.LoadOrStore(tag, &tagQueue{f: f, tag: tag})
	return q.(*tagQueue)
}

// ownerFor is the client of the owner at base, made on first use.
func (f *Forwarder) ownerFor(base string) (*owner, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if o := f.owners[base]; o != nil {
		o.lastUsed.Store(now.UnixNano())
		return o, nil
	}
	if len(f.owners) >= keptOwners {
		for u, o := range f.owners {
			if now.Sub(time.Unix(0, o.lastUsed.Load())) > ownerIdle {
				delete(f.owners, u)
			}
		}
	}
	// One attempt: the queue asks again, the generator consulted first;
	// no cool-down, of a client of one server; no timeout of its own,
	// the call's deadline bounds it; the owner's answers name no other.
	c, err := client.New([]string{base}, append([]client.Option{client.WithHTTPClient(f.hc), client.WithAttempts(1),
		client.WithCooldown(0), client.WithTimeout(maxCall), client.WithOwnerRouting(false), client.WithLogger(f.log)},
		f.headers...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: the owner's URL %q is not an http(s) base URL: %w", leaf.ErrOwnerUnreachable, base, err)
	}
	o := &owner{url: base, c: c}
	o.lastUsed.Store(now.UnixNano())
	f.owners[base] = o
	return o, nil
}

// maxCall is the client's bound of one call: above any wait (the call's
// deadline is the one that counts).
const maxCall = time.Hour

// call asks the owner at base for n IDs of tag, by deadline: [start, end),
// 1 <= end-start <= n. The client checks the answer.
func (f *Forwarder) call(base, tag string, n int, deadline time.Time) (start, end int64, err error) {
	f.calls.Add(1)
	defer func() {
		if err != nil {
			f.failures.Add(1)
		}
	}()
	o, err := f.ownerFor(base)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	start, end, err = o.c.NextRange(ctx, tag, n)
	ae, answered := errors.AsType[*client.Error](err)
	if err != nil && !answered {
		// No answer, or one that is not a range: a dead owner, a
		// timeout, a garbled body.
		if o.down.CompareAndSwap(false, true) {
			f.log.Warn("forward: the owner of an ordered tag does not answer", "tag", tag, "owner", base, "err", err)
		}
		return 0, 0, fmt.Errorf("%w: tag %s: owner %s: %w", leaf.ErrOwnerUnreachable, tag, base, err)
	}
	if o.down.CompareAndSwap(true, false) {
		f.log.Info("forward: the owner of an ordered tag answers again", "tag", tag, "owner", base)
	}
	if err == nil {
		return start, end, nil
	}
	kind, _ := apierr.ByCode(ae.Code)
	switch {
	case kind.Err == leaf.ErrNotOwner || kind.Err == leaf.ErrLeaseLost || kind.Err == leaf.ErrOrderedTag:
		// Not (or no longer) the owner; or the tag is no longer ordered
		// there, and the generator here will say so too.
		return 0, 0, fmt.Errorf("%w: %w: tag %s: %s answered %d %s: %s", leaf.ErrOwnerUnreachable, errNotOwner, tag, base, ae.StatusCode, ae.Code, ae.Message)
	case kind.Err == leaf.ErrTagNotFound:
		return 0, 0, fmt.Errorf("forward: tag %s: owner %s: %w", tag, base, leaf.ErrTagNotFound)
	case ae.StatusCode == http.StatusUnauthorized:
		return 0, 0, fmt.Errorf("%w: tag %s: owner %s refused the forwarded request (401): the servers' admin tokens differ", leaf.ErrOwnerUnreachable, tag, base)
	}
	return 0, 0, fmt.Errorf("%w: tag %s: owner %s answered %d %s: %s", leaf.ErrOwnerUnreachable, tag, base, ae.StatusCode, ae.Code, ae.Message)
}
