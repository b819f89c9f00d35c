package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/backoff"
	"github.com/leafgo/leaf/tagshape"
)

// Defaults of the options.
const (
	// DefaultTimeout bounds one attempt: one request to one server.
	DefaultTimeout = time.Second
	// DefaultCooldown is how long a server that failed is tried only after
	// the others.
	DefaultCooldown = time.Second
)

// Bounds of the waits between retries.
const (
	// firstRetryWait bounds the pause after every server has failed once in
	// a call; the bound doubles per round up to maxRetryWait, and each pause
	// is drawn below it (full jitter), so that clients that failed together
	// do not come back together.
	firstRetryWait = 50 * time.Millisecond
	// maxRetryWait caps a pause between rounds, Retry-After included: a
	// server asking for more is tried again after this long at most (another
	// server may answer sooner).
	maxRetryWait = time.Second
	// maxCooldown caps how far a Retry-After extends a server's cool-down.
	maxCooldown = 10 * time.Second
	// maxBody bounds a response body: a batch of 10,000 IDs, as numbers and
	// as strings, is about 400 KB.
	maxBody = 4 << 20
)

// Option configures a Client.
type Option func(*Client) error

// WithHTTPClient sends requests through hc instead of the Client's own
// (which keeps up to 64 idle connections per server). Its Timeout, if set,
// applies on top of WithTimeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return fmt.Errorf("%w: WithHTTPClient(nil)", leaf.ErrInvalidArgument)
		}
		c.hc = hc
		return nil
	}
}

// WithTimeout bounds each attempt (one request to one server); a server
// that has not answered by then is given up on and the next one is tried.
// The whole call is bounded by its context and the attempt budget.
// Default: DefaultTimeout (1s).
func WithTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithTimeout(%s), want > 0", leaf.ErrInvalidArgument, d)
		}
		c.timeout = d
		return nil
	}
}

// WithHeader sends the header name: value with every request, e.g. an
// Authorization for servers that ask one of their peers (a server
// forwarding to an ordered tag's owner sends its admin token so). It may
// be given several times, for several headers; the client's own Accept is
// not to be replaced.
func WithHeader(name, value string) Option {
	return func(c *Client) error {
		key := http.CanonicalHeaderKey(name)
		if !validHeaderName(name) || key == "Accept" || strings.ContainsAny(value, "\r\n\x00") {
			return fmt.Errorf("%w: WithHeader(%q, ...): want a header name other than Accept and a value of one line",
				leaf.ErrInvalidArgument, name)
		}
		c.headers = append(c.headers, header{key, []string{value}})
		return nil
	}
}

// header is one header WithHeader adds to every request.
type header struct {
	key   string // canonical
	value []string
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// WithAttempts sets the most requests one call makes, over all servers,
// the first included: 1 means no retry. Default: one per server plus one,
// and at least 3.
func WithAttempts(n int) Option {
	return func(c *Client) error {
		if n < 1 {
			return fmt.Errorf("%w: WithAttempts(%d), want >= 1", leaf.ErrInvalidArgument, n)
		}
		c.attempts = n
		return nil
	}
}

// WithCooldown sets how long a server that failed (transport error or 5xx)
// goes to the back of the line: calls try it only after every other server.
// A Retry-After from the server lengthens it, up to 10s. 0 turns it off.
// Default: DefaultCooldown (1s).
func WithCooldown(d time.Duration) Option {
	return func(c *Client) error {
		if d < 0 {
			return fmt.Errorf("%w: WithCooldown(%s), want >= 0", leaf.ErrInvalidArgument, d)
		}
		c.cooldown = d
		return nil
	}
}

// WithLogger receives one Warn line when a server starts failing (and its
// cool-down begins), one per failed lease load of a Buffered, and Debug
// lines per failed attempt. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger(nil)", leaf.ErrInvalidArgument)
		}
		c.log = l
		return nil
	}
}

// WithOwnerRouting turns routing to owners on (the default) or off. An
// ordered tag's IDs are issued by one server, its owner, and the others
// forward its requests there. A forwarded answer names the owner (header
// Leaf-Owner); with routing on, when that URL is one of the client's
// endpoints, the tag's next calls try it first, whatever its zone, since
// any other server would forward them to it anyway. This spares the
// forward, a second hop per call. The preference is only an order: when
// the owner fails or hands the tag on, the call goes on as for any tag, and
// the next forwarded answer names the new owner. Routing needs the
// endpoints listed as the servers advertise themselves
// (server.advertise_url).
func WithOwnerRouting(on bool) Option {
	return func(c *Client) error {
		c.noOwners = !on
		return nil
	}
}

// Client calls a cluster of leaf servers over the /v2 JSON API, failing
// over from one to the next. It is safe for concurrent use.
type Client struct {
	eps      []*endpoint
	hc       *http.Client
	timeout  time.Duration
	headers  []header // WithHeader's, set on every request
	attempts int
	cooldown time.Duration
	log      *slog.Logger
	rr       atomic.Uint64 // round-robin position: each call starts one further; random at first

	zone string // WithZone: the client's own zone; "" prefers none
	// tiers are the indexes of eps in order of preference: the own zone's
	// servers, then the others; one tier of all without a zone.
	tiers [][]int
	// away is set while calls are answered from other zones than the own:
	// the warning is logged once per trip, not once per call.
	away atomic.Bool

	// sleep is the pause between rounds: backoff.Sleep, or a test's
	// recorder of the pauses asked for (export_test.go).
	sleep func(ctx context.Context, d time.Duration) error

	noOwners bool           // WithOwnerRouting(false)
	byBase   map[string]int // ownerKey(base) → index in eps
	// owners maps an ordered tag to its owner (ownerHint), as the last
	// forwarded answer named it. Bounded by maxOwners (nOwners counts it,
	// give or take the races of a Clear): past it, it starts over (a
	// forward teaches it again).
	owners  sync.Map
	nOwners atomic.Int32
}

// ownerHint is an ordered tag's owner: its index in eps, until a time.
type ownerHint struct {
	i     int
	until int64 // Unix ns
}

// maxOwners bounds the ordered tags whose owners a Client remembers;
// ownerTTL is how long one is remembered. The owner's own answers do not
// say the tag is still ordered: a tag made plain again would otherwise
// keep all its calls on one server. Once the hint lapses, the next
// forwarded answer names the owner again.
const (
	maxOwners = 4096
	ownerTTL  = 30 * time.Second
)

// endpoint is one server.
type endpoint struct {
	base      string       // scheme://host[:port][/prefix], no trailing slash
	zone      string       // Endpoint.Zone; "" for none
	downUntil atomic.Int64 // Unix ns until which it is tried last; 0: healthy
	requests  atomic.Uint64
	failures  atomic.Uint64
}

// New returns a client of the servers at endpoints, base URLs such as
// "http://10.0.0.1:8080" (a path prefix is kept: "https://gw/leaf"). Every
// endpoint must be an absolute http or https URL with a host and no query,
// fragment or user info; duplicates are refused. NewZoned takes endpoints
// with zones.
func New(endpoints []string, opts ...Option) (*Client, error) {
	eps := make([]Endpoint, len(endpoints))
	for i, u := range endpoints {
		eps[i].URL = u
	}
	return NewZoned(eps, opts...)
}

// newClient builds the Client of New and NewZoned.
func newClient(endpoints []Endpoint, opts []Option) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("leaf client: %w: no endpoints", leaf.ErrInvalidArgument)
	}
	c := &Client{timeout: DefaultTimeout, cooldown: DefaultCooldown, log: slog.Default(), sleep: backoff.Sleep}
	seen := make(map[string]bool, len(endpoints))
	for _, e := range endpoints {
		base, err := parseEndpoint(e.URL)
		if err != nil {
			return nil, err
		}
		if seen[base] {
			return nil, fmt.Errorf("leaf client: %w: endpoint %q listed twice", leaf.ErrInvalidArgument, e.URL)
		}
		if e.Zone != "" && !validZone(e.Zone) {
			return nil, fmt.Errorf("leaf client: %w: endpoint %q: zone %q %s", leaf.ErrInvalidArgument, e.URL, e.Zone, zoneSyntax)
		}
		seen[base] = true
		c.eps = append(c.eps, &endpoint{base: base, zone: e.Zone})
	}
	c.byBase = make(map[string]int, len(c.eps))
	for i, ep := range c.eps {
		c.byBase[ownerKey(ep.base)] = i
	}
	c.attempts = max(3, len(c.eps)+1)
	// Start the rotation at a random server, so that many processes
	// started together do not all send their first requests to the first.
	c.rr.Store(rand.Uint64())
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, fmt.Errorf("leaf client: %w", err)
		}
	}
	if err := c.buildTiers(); err != nil {
		return nil, fmt.Errorf("leaf client: %w", err)
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The default of 2 idle connections per host makes concurrent
		// callers open and close a connection per request.
		t.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Transport: t}
	}
	return c, nil
}

// parseEndpoint validates a base URL and returns it without a trailing slash.
func parseEndpoint(e string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("leaf client: %w: endpoint %q %s; want a base URL such as \"http://127.0.0.1:8080\"",
			leaf.ErrInvalidArgument, e, why)
	}
	if strings.TrimSpace(e) != e || e == "" {
		return "", bad("is empty or has surrounding spaces")
	}
	u, err := url.Parse(e)
	switch {
	case err != nil:
		return "", bad("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("has no http:// or https:// scheme")
	case u.Opaque != "" || u.Host == "":
		return "", bad("has no host")
	case u.Port() != "" && !validPort(u.Port()):
		return "", bad("has an invalid port")
	case u.User != nil:
		return "", bad("has user info")
	case u.RawQuery != "" || u.ForceQuery:
		return "", bad("has a query")
	case u.Fragment != "" || strings.Contains(e, "#"):
		return "", bad("has a fragment")
	}
	return strings.TrimRight(e, "/"), nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// NextID issues one segment ID for tag (POST /v2/segment/{tag}).
//
// Like every call here it may be sent more than once, to several servers,
// when one fails or does not answer in time. That is safe for uniqueness:
// a server that issued an ID whose answer was lost never issues it again,
// so a retry only skips IDs, never duplicates one.
//
// A periodic tag's IDs restart each period, so the number alone repeats
// from one period to the next: NextIDPeriod also returns the period.
func (c *Client) NextID(ctx context.Context, tag string) (int64, error) {
	id, _, err := c.NextIDPeriod(ctx, tag)
	return id, err
}

// NextIDPeriod is NextID that also returns the period the ID belongs to,
// for a periodic tag: its key, yyyymmdd, yyyymm or yyyy in the tag's time
// zone; "" for a plain tag. The pair (period, ID) is unique.
func (c *Client) NextIDPeriod(ctx context.Context, tag string) (int64, string, error) {
	r, err := c.next(ctx, tag)
	return r.ID, r.Period, err
}

// NextIDFormatted issues one ID of a tag with an ID format and returns it as
// the format writes it, e.g. "ORD-20261124-000123" (the period is part of
// it for a periodic tag). A tag without a format fails with
// ErrNotFormatted (the ID the server issued is lost, never reissued); one
// whose sequence outgrew the format's width with ErrFormatExhausted.
func (c *Client) NextIDFormatted(ctx context.Context, tag string) (string, error) {
	r, err := c.next(ctx, tag)
	if err != nil {
		return "", err
	}
	if r.Formatted == nil {
		return "", fmt.Errorf("leaf client: tag %s: %w", tag, ErrNotFormatted)
	}
	return *r.Formatted, nil
}

// idAnswer is the body of POST /v2/segment/{tag}.
type idAnswer struct {
	Tag       string  `json:"tag"`
	ID        int64   `json:"id"`
	Period    string  `json:"period"`
	Formatted *string `json:"formatted"`
}

func (c *Client) next(ctx context.Context, tag string) (idAnswer, error) {
	var r idAnswer
	if err := leaf.ValidateTag(tag); err != nil {
		return r, fmt.Errorf("leaf client: %w", err)
	}
	err := c.call(ctx, http.MethodPost, "/v2/segment/"+tag, tag, func(body []byte) error {
		r = idAnswer{}
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		if r.Tag != tag {
			return fmt.Errorf("answer is for tag %q", r.Tag)
		}
		if err := checkPeriod(r.Period); err != nil {
			return err
		}
		if r.Formatted != nil && *r.Formatted == "" {
			return errors.New("empty formatted ID")
		}
		return leaf.ValidateID(r.ID)
	})
	return r, err
}

// checkPeriod refuses a period that is not a period key.
func checkPeriod(period string) error {
	if period == "" {
		return nil
	}
	return tagshape.ValidatePeriodKey(period)
}

// NextIDs issues n segment IDs for tag, 1 <= n <= leaf.MaxBatch, in
// increasing order (POST /v2/segment/{tag}/batch). They may span two of the
// server's segments, so they are not always contiguous. For a periodic
// tag, see NextIDsPeriod.
func (c *Client) NextIDs(ctx context.Context, tag string, n int) ([]int64, error) {
	ids, _, err := c.NextIDsPeriod(ctx, tag, n)
	return ids, err
}

// NextIDsPeriod is NextIDs that also returns the period all the IDs
// belong to, for a periodic tag (see NextIDPeriod); "" for a plain tag.
func (c *Client) NextIDsPeriod(ctx context.Context, tag string, n int) ([]int64, string, error) {
	r, err := c.nextIDs(ctx, tag, n)
	if err != nil {
		return nil, "", err
	}
	return r.IDs, r.Period, nil
}

// NextIDsFormatted is NextIDFormatted for n IDs, 1 <= n <= leaf.MaxBatch, in
// the order the server issued them (see NextIDs). One ID past the
// format's width fails the whole batch with ErrFormatExhausted.
func (c *Client) NextIDsFormatted(ctx context.Context, tag string, n int) ([]string, error) {
	r, err := c.nextIDs(ctx, tag, n)
	if err != nil {
		return nil, err
	}
	if r.Formatted == nil {
		return nil, fmt.Errorf("leaf client: tag %s: %w", tag, ErrNotFormatted)
	}
	return r.Formatted, nil
}

// idsAnswer is the body of POST /v2/segment/{tag}/batch.
type idsAnswer struct {
	Tag       string   `json:"tag"`
	IDs       []int64  `json:"ids"`
	Period    string   `json:"period"`
	Formatted []string `json:"formatted"`
}

func (c *Client) nextIDs(ctx context.Context, tag string, n int) (idsAnswer, error) {
	var r idsAnswer
	if err := leaf.ValidateTag(tag); err != nil {
		return r, fmt.Errorf("leaf client: %w", err)
	}
	if err := leaf.ValidateCount(n); err != nil {
		return r, fmt.Errorf("leaf client: %w", err)
	}
	err := c.call(ctx, http.MethodPost, "/v2/segment/"+tag+"/batch?count="+strconv.Itoa(n), tag, func(body []byte) error {
		r = idsAnswer{}
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		if r.Tag != tag {
			return fmt.Errorf("answer is for tag %q", r.Tag)
		}
		if err := checkPeriod(r.Period); err != nil {
			return err
		}
		if r.Formatted != nil && (len(r.Formatted) != len(r.IDs) || slices.Contains(r.Formatted, "")) {
			return fmt.Errorf("%d formatted IDs for %d IDs", len(r.Formatted), len(r.IDs))
		}
		return leaf.ValidateIDs(r.IDs, n)
	})
	if err != nil {
		return idsAnswer{}, err
	}
	return r, nil
}

// NextRange leases the contiguous segment IDs [start, end) of tag for the caller
// to hand out itself (POST /v2/segment/{tag}/range), 1 <= n <= leaf.MaxRange
// (servers before 0.6 take at most leaf.MaxBatch and answer a longer one
// with ErrInvalidCount). The range may be shorter than n: 1 <= end-start <=
// n. Buffered builds on it. A periodic tag's range belongs to one period:
// see NextRangePeriod.
func (c *Client) NextRange(ctx context.Context, tag string, n int) (start, end int64, err error) {
	start, end, _, err = c.NextRangePeriod(ctx, tag, n)
	return start, end, err
}

// NextRangePeriod is NextRange that also returns the period the whole range
// belongs to, for a periodic tag (see NextIDPeriod); "" for a plain tag.
func (c *Client) NextRangePeriod(ctx context.Context, tag string, n int) (start, end int64, period string, err error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return 0, 0, "", fmt.Errorf("leaf client: %w", err)
	}
	if err := leaf.ValidateRangeCount(n); err != nil {
		return 0, 0, "", fmt.Errorf("leaf client: %w", err)
	}
	var r struct {
		Tag    string `json:"tag"`
		Start  int64  `json:"start"`
		End    int64  `json:"end"`
		Count  int64  `json:"count"`
		Period string `json:"period"`
	}
	err = c.call(ctx, http.MethodPost, "/v2/segment/"+tag+"/range?count="+strconv.Itoa(n), "", func(body []byte) error {
		r.Period = ""
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		switch {
		case r.Tag != tag:
			return fmt.Errorf("answer is for tag %q", r.Tag)
		case r.Start < 1 || r.End <= r.Start || r.End-r.Start > int64(n) || r.Count != r.End-r.Start:
			return fmt.Errorf("range [%d, %d) of count %d for %d IDs asked", r.Start, r.End, r.Count, n)
		}
		return checkPeriod(r.Period)
	})
	if err != nil {
		return 0, 0, "", err
	}
	return r.Start, r.End, r.Period, nil
}

// SnowflakeID issues one snowflake ID (POST /v2/snowflake).
func (c *Client) SnowflakeID(ctx context.Context) (int64, error) {
	var r struct {
		ID int64 `json:"id"`
	}
	err := c.call(ctx, http.MethodPost, "/v2/snowflake", "", func(body []byte) error {
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		return leaf.ValidateID(r.ID)
	})
	return r.ID, err
}

// SnowflakeIDs issues n snowflake IDs, 1 <= n <= leaf.MaxBatch, in
// increasing order (POST /v2/snowflake/batch).
func (c *Client) SnowflakeIDs(ctx context.Context, n int) ([]int64, error) {
	if err := leaf.ValidateCount(n); err != nil {
		return nil, fmt.Errorf("leaf client: %w", err)
	}
	var r struct {
		IDs []int64 `json:"ids"`
	}
	err := c.call(ctx, http.MethodPost, "/v2/snowflake/batch?count="+strconv.Itoa(n), "", func(body []byte) error {
		r.IDs = nil
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		return leaf.ValidateIDs(r.IDs, n)
	})
	if err != nil {
		return nil, err
	}
	return r.IDs, nil
}

// Decode takes a snowflake ID apart with the servers' layout
// (GET /v2/snowflake/decode/{id}). An ID the layout cannot have produced is
// refused with an error matching leaf.ErrInvalidArgument.
func (c *Client) Decode(ctx context.Context, id int64) (leaf.SnowflakeParts, error) {
	type answer struct {
		ID          int64 `json:"id"`
		TimestampMs int64 `json:"timestamp_ms"`
		WorkerID    int64 `json:"worker_id"`
		Sequence    int64 `json:"sequence"`
	}
	var r answer
	err := c.call(ctx, http.MethodGet, "/v2/snowflake/decode/"+strconv.FormatInt(id, 10), "", func(body []byte) error {
		r = answer{} // a retry decodes into a clean value
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		if r.ID != id {
			return fmt.Errorf("answer is for ID %d", r.ID)
		}
		return nil
	})
	if err != nil {
		return leaf.SnowflakeParts{}, err
	}
	return leaf.SnowflakeParts{ID: r.ID, Timestamp: r.TimestampMs, WorkerID: r.WorkerID, Sequence: r.Sequence}, nil
}

// badAnswerError is a 200 whose body makes no sense: truncated by a server
// that died mid-answer, or from something that is not a leaf server. It is
// retried on the next server.
type badAnswerError struct {
	method, url string
	err         error
}

func (e *badAnswerError) Error() string {
	return "leaf client: " + e.method + " " + e.url + ": bad answer: " + e.err.Error()
}

func (e *badAnswerError) Unwrap() error { return e.err }

// call sends one request to the cluster: to the server whose turn it is,
// then to the next one on a transport error, a timeout, a 5xx or a bad
// answer, up to the attempt budget. Servers that failed lately are tried
// after the others. Once every server has failed in this call, it pauses
// before the next round: a random time below 50ms, a bound that doubles per
// round up to 1s (full jitter), or the servers' Retry-After up to 1s if
// longer. A 4xx is returned at once. decode parses a 200 body. For the ID
// calls of a segment tag, tag is the tag: an ordered tag's known owner is
// tried first (WithOwnerRouting); else "".
func (c *Client) call(ctx context.Context, method, path, tag string, decode func([]byte) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("leaf client: %s %s: %w", method, path, err)
	}
	n := len(c.eps)
	rot := c.rr.Add(1) - 1
	var triedBuf [8]bool
	var tried []bool // the servers this round has tried
	if n <= len(triedBuf) {
		tried = triedBuf[:n]
	} else {
		tried = make([]bool, n)
	}
	var last error
	pause := backoff.Backoff{Base: firstRetryWait, Max: maxRetryWait}
	var retryAfter time.Duration // the largest asked for in this round
	left := n                    // servers not yet tried in this round
	owner := -1                  // the tag's owner, tried first
	if tag != "" {
		owner = c.ownerOf(tag)
	}
	for attempt := 0; attempt < c.attempts; attempt++ {
		if left == 0 {
			// A server's Retry-After is a floor; the jitter is ours.
			d := max(pause.Next(), min(retryAfter, maxRetryWait))
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
				// Pausing would outlast the caller: answer now.
				return fmt.Errorf("%w (every server failed; no time left to retry)", last)
			}
			if err := c.sleep(ctx, d); err != nil {
				return fmt.Errorf("leaf client: %w while waiting to retry; last attempt: %w", err, last)
			}
			clear(tried)
			left, retryAfter = n, 0
		}
		i := owner
		if i < 0 || attempt > 0 || c.eps[i].downUntil.Load() > time.Now().UnixNano() {
			i = c.pick(rot, tried)
		}
		tried[i] = true
		left--
		ep := c.eps[i]
		ep.requests.Add(1)
		named, err := c.attempt(ctx, ep, method, path, decode)
		if err == nil {
			if ep.downUntil.Load() != 0 {
				ep.downUntil.Store(0)
			}
			if named != "" && tag != "" && !c.noOwners {
				c.noteOwner(tag, named)
			}
			if c.zone != "" && i != owner {
				// An owner answers from wherever it runs: that says
				// nothing of the client's zone.
				c.noteZone(ep)
			}
			return nil
		}
		last = err
		if i == owner {
			// Whoever owns the tag now, the next forwarded answer says.
			c.forgetOwner(tag)
			owner = -1
		}
		if ctx.Err() != nil {
			// The caller's context, not the attempt's timeout.
			return err
		}
		var se *Error
		if errors.As(err, &se) {
			if !se.retryable() {
				return err
			}
			retryAfter = max(retryAfter, se.RetryAfter)
		}
		ep.failures.Add(1)
		c.markDown(ep, err, se)
	}
	if c.attempts == 1 {
		return last
	}
	return fmt.Errorf("%w (after %d attempts)", last, c.attempts)
}

// pick chooses the next server of a call: the first in round-robin order
// from rot, in the most preferred tier (the own zone, then the others), that
// this call has not tried and that is not cooling down; else the untried one
// of the most preferred tier whose cool-down ends soonest.
func (c *Client) pick(rot uint64, tried []bool) int {
	now := time.Now().UnixNano()
	best, bestTier, bestUntil := -1, 0, int64(0)
	for t, tier := range c.tiers {
		m := len(tier)
		first := int(rot % uint64(m))
		for k := range m {
			i := tier[(first+k)%m]
			if tried[i] {
				continue
			}
			until := c.eps[i].downUntil.Load()
			if until <= now {
				return i
			}
			if best < 0 || (t == bestTier && until < bestUntil) {
				best, bestTier, bestUntil = i, t, until
			}
		}
	}
	return best
}

// markDown starts a server's cool-down after a failure.
func (c *Client) markDown(ep *endpoint, err error, se *Error) {
	d := c.cooldown
	if se != nil && se.RetryAfter > d {
		d = min(se.RetryAfter, maxCooldown)
	}
	c.log.Debug("leaf client: attempt failed", "endpoint", ep.base, "err", err)
	if d <= 0 {
		return
	}
	now := time.Now()
	if old := ep.downUntil.Swap(now.Add(d).UnixNano()); old <= now.UnixNano() {
		if ep.zone != "" {
			c.log.Warn("leaf client: server failed; trying the others first", "endpoint", ep.base, "zone", ep.zone, "for", d, "err", err)
		} else {
			c.log.Warn("leaf client: server failed; trying the others first", "endpoint", ep.base, "for", d, "err", err)
		}
	}
}

// attempt sends one request to one server, bounded by the per-attempt
// timeout, and decodes a 200 body. owner is the owner of an ordered tag
// that a forwarded answer names (Leaf-Owner), or that answered after a
// redirect; else "".
func (c *Client) attempt(ctx context.Context, ep *endpoint, method, path string, decode func([]byte) error) (owner string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := ep.base + path
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return "", fmt.Errorf("leaf client: %w", err)
	}
	req.Header["Accept"] = acceptJSON
	for _, h := range c.headers {
		req.Header[h.key] = h.value
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("leaf client: %w", err) // *url.Error names method and URL
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("leaf client: %s %s: reading the answer: %w", method, u, err)
	}
	if len(body) > maxBody {
		err = fmt.Errorf("answer is over %d bytes", maxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return "", answerError(method, u, resp, body)
	}
	if err == nil {
		err = decode(body)
	}
	if err != nil {
		return "", &badAnswerError{method, u, err}
	}
	if v := resp.Header[ownerHeader]; len(v) > 0 {
		owner = v[0]
	} else if via := resp.Request.Response; via != nil {
		// Redirected: by a server answering an ordered tag's requests
		// with the owner's URL (segment.ordered: redirect), which names
		// it; any other redirect says nothing of owners.
		if v := via.Header[ownerHeader]; len(v) > 0 {
			owner = v[0]
		}
	}
	return owner, nil
}

// ownerHeader is forward.OwnerHeader, in canonical form.
const ownerHeader = "Leaf-Owner"

// ownerKey is how an endpoint's base URL and an owner's advertised URL are
// compared: scheme and host are case-insensitive, a trailing slash is
// nothing.
func ownerKey(u string) string { return strings.ToLower(strings.TrimRight(u, "/")) }

// ownerOf is the index of tag's owner among the endpoints, or -1.
func (c *Client) ownerOf(tag string) int {
	v, ok := c.owners.Load(tag)
	if !ok {
		return -1
	}
	if h := v.(ownerHint); time.Now().UnixNano() < h.until {
		return h.i
	}
	// Not a hint stored since the Load.
	if c.owners.CompareAndDelete(tag, v) {
		c.nOwners.Add(-1)
	}
	return -1
}

// noteOwner learns tag's owner from an answer that names it.
func (c *Client) noteOwner(tag, named string) {
	j, ok := c.byBase[ownerKey(named)]
	if !ok {
		// An owner the client cannot call (another URL than the ones it
		// was given): the servers keep forwarding.
		c.forgetOwner(tag)
		return
	}
	if _, loaded := c.owners.Swap(tag, ownerHint{j, time.Now().Add(ownerTTL).UnixNano()}); !loaded && c.nOwners.Add(1) > maxOwners {
		c.owners.Clear()
		c.nOwners.Store(0)
	}
}

// forgetOwner drops tag's owner.
func (c *Client) forgetOwner(tag string) {
	if _, loaded := c.owners.LoadAndDelete(tag); loaded {
		c.nOwners.Add(-1)
	}
}

var acceptJSON = []string{"application/json"}

// answerError builds the Error of a non-200 answer.
func answerError(method, u string, resp *http.Response, body []byte) *Error {
	e := &Error{
		Method:     method,
		URL:        u,
		StatusCode: resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}
	var b struct {
		Error *string `json:"error"`
		Code  string  `json:"code"`
	}
	if json.Unmarshal(body, &b) == nil && b.Error != nil {
		e.Code, e.Message = b.Code, *b.Error
	} else {
		e.Message = plainMessage(body)
	}
	return e
}
