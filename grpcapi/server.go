package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/reqlog"
	"github.com/leafgo/leaf/tagshape"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
)

// SegmentGenerator is what the segment methods need from the segment
// generator; *segment.Generator satisfies it. Errors wrap the sentinels of
// package leaf.
type SegmentGenerator interface {
	// NextIDPeriod issues one ID for tag, and names its period: a
	// periodic tag's key (yyyymmdd, yyyymm or yyyy), "" for a plain tag.
	NextIDPeriod(ctx context.Context, tag string) (id int64, period string, err error)
	// NextIDsPeriod appends n strictly increasing IDs for tag to dst, all
	// of one period, which it names.
	NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error)
	// Take leases the contiguous IDs [Start, End), 1 <= End-Start <= n,
	// of one period, which it names, for use (the service asks
	// leaf.ByClient); the range may be shorter than n (it never spans two
	// segments).
	Take(ctx context.Context, tag string, n int, use leaf.RangeUse) (leaf.IDRange, error)
	// TagShape is the tag's shape (the zero shape for a plain tag), which
	// the answers format IDs with: called for every segment call, it must
	// answer from memory once the tag was served, and must not let made-up
	// names reach the store one for one.
	TagShape(ctx context.Context, tag string) (leaf.TagShape, error)
}

// IDSource issues segment IDs and names their period (see
// SegmentGenerator).
type IDSource interface {
	NextIDPeriod(ctx context.Context, tag string) (id int64, period string, err error)
	NextIDsPeriod(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, error)
}

// SnowflakeGenerator is what the snowflake methods need from the snowflake
// generator; *snowflake.Generator satisfies it. Errors wrap the sentinels of
// package leaf.
type SnowflakeGenerator interface {
	// NextID issues one ID. The key is ignored, as in Leaf.
	leaf.Generator
	// NextIDs appends n strictly increasing IDs to dst. The key is ignored.
	leaf.BatchGenerator
	// Decode takes an ID apart with the generator's layout; the error wraps
	// leaf.ErrInvalidArgument for an ID the layout cannot have produced.
	Decode(id int64) (leaf.SnowflakeParts, error)
}

// Config configures the Leaf service. The zero value serves health and
// reflection, and answers NotFound ("segment mode is disabled", "snowflake
// mode is disabled") on every method of the Leaf service.
type Config struct {
	// Segment issues segment IDs: NextID, NextIDs, Range. A nil interface
	// disables segment mode: those methods answer NotFound. (A nil
	// *segment.Generator in a non-nil interface is not nil: leave the field
	// unset instead.) Range refuses an ordered tag (FailedPrecondition).
	Segment SegmentGenerator
	// Forward, when set with Segment, issues the IDs of NextID and NextIDs
	// instead (ordered/forward's Forwarder): Segment's, or at the owner
	// of an ordered tag another server owns. gRPC has no redirect, so a
	// server that does not own an ordered tag forwards its calls to the
	// owner (over HTTP, as the HTTP routes do) whatever segment.ordered
	// says.
	Forward IDSource
	// Snowflake issues and decodes snowflake IDs: SnowflakeNextID,
	// SnowflakeNextIDs, Decode. Nil disables snowflake mode: those methods
	// answer NotFound, Decode included, since the layout belongs to the
	// generator.
	Snowflake SnowflakeGenerator
	// Logger receives the causes of failed calls (Internal, Unavailable,
	// DeadlineExceeded) with their request IDs, at most ten lines per ten
	// seconds. Nil means slog.Default(). Nothing is logged per successful
	// call.
	Logger *slog.Logger
	// Limiter, when set, limits the ID methods (not Decode) per client
	// address: over the limit a call fails with ResourceExhausted and a
	// RetryInfo of the client's wait. internal/ratelimit's Limiter
	// satisfies it, as it does httpapi's.
	Limiter ClientLimiter
}

// ClientLimiter limits how fast one client may take IDs. Allow is called
// once per ID call: it must be cheap and safe for concurrent use.
type ClientLimiter interface {
	// Allow reports whether the client may be served now and, if not, how
	// long until it may.
	Allow(client netip.Addr) (ok bool, retryAfter time.Duration)
}

// Register registers on s the Leaf service (leaf.v1.Leaf), the standard
// health service (grpc.health.v1.Health) and server reflection.
//
// Health answers SERVING for "" (the server) and for "leaf.v1.Leaf" for as
// long as the process runs, like httpapi's /healthz. A degraded generator (a
// store unreachable, a registry lost) is not NOT_SERVING: it keeps issuing
// from its buffers, that is what they are for, and every server sees the same
// outage, so taking them all out of a load balancer at once would turn a
// database blip into a full outage. Degradation is reported by httpapi's
// /readyz and by the metrics.
func Register(s *grpc.Server, cfg Config) {
	leafv1.RegisterLeafServer(s, newService(cfg))

	hs := health.NewServer()
	hs.SetServingStatus("", healthgrpc.HealthCheckResponse_SERVING)
	hs.SetServingStatus(leafv1.Leaf_ServiceDesc.ServiceName, healthgrpc.HealthCheckResponse_SERVING)
	healthgrpc.RegisterHealthServer(s, hs)

	reflection.Register(s)
}

// NewServer returns a gRPC server built with opts, with Register done. The
// caller serves it (s.Serve(listener)) and stops it (s.GracefulStop()).
func NewServer(cfg Config, opts ...grpc.ServerOption) *grpc.Server {
	s := grpc.NewServer(opts...)
	Register(s, cfg)
	return s
}

// service implements leafv1.LeafServer. Each method validates its request,
// calls a generator, checks what the generator returned, and answers the ID
// or, through the error table (internal/apierr), a status; never both.
type service struct {
	leafv1.UnimplementedLeafServer
	seg  SegmentGenerator
	ids  IDSource // cfg.Forward, or seg
	snow SnowflakeGenerator
	log  *slog.Logger
	lim  ClientLimiter
	// errLog bounds the lines logged for failed calls (statusError).
	errLog *reqlog.Budget
}

// DefaultConfig returns the defaults a zero field of Config takes. The
// other fields are what the service serves: a nil one answers NotFound,
// and Register refuses nothing.
func DefaultConfig() Config { return Config{Logger: slog.Default()} }

func newService(cfg Config) *service {
	s := &service{seg: cfg.Segment, snow: cfg.Snowflake, log: cfg.Logger, lim: cfg.Limiter,
		errLog: &reqlog.Budget{Lines: 10, Window: 10 * time.Second}}
	if s.log == nil {
		s.log = DefaultConfig().Logger
	}
	s.ids = s.seg
	if cfg.Forward != nil {
		s.ids = cfg.Forward
	}
	return s
}

// NextID issues one segment ID.
func (s *service) NextID(ctx context.Context, req *leafv1.NextIDRequest) (*leafv1.NextIDResponse, error) {
	tag := req.GetTag()
	if err := s.admit(ctx, s.segmentTag(tag)); err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	id, period, err := s.ids.NextIDPeriod(ctx, tag)
	if err == nil {
		err = validateID(id)
	}
	if err != nil {
		return nil, s.statusError(ctx, tag, err)
	}
	// After the ID: the generator read the shape at the tag's first load,
	// so this is from memory.
	shape, err := s.seg.TagShape(ctx, tag)
	if err != nil {
		return nil, s.statusError(ctx, tag, err)
	}
	resp := &leafv1.NextIDResponse{Id: id, Period: period}
	if !shape.Format.IsPlain() {
		if resp.Formatted, err = tagshape.Format(shape.Format, period, id); err != nil {
			return nil, s.statusError(ctx, tag, apierr.FormatError(tag, err))
		}
	}
	return resp, nil
}

// NextIDs issues a batch of segment IDs.
func (s *service) NextIDs(ctx context.Context, req *leafv1.NextIDsRequest) (*leafv1.NextIDsResponse, error) {
	tag := req.GetTag()
	n, err := s.admitBatch(ctx, s.segmentTag(tag), req.GetCount())
	if err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	// The slice becomes the response's; gRPC marshals it after this method
	// returns, so it cannot come from a pool.
	ids, period, err := s.ids.NextIDsPeriod(ctx, tag, n, make([]int64, 0, n))
	if err == nil {
		err = validateIDs(ids, n)
	}
	if err != nil {
		return nil, s.statusError(ctx, tag, err)
	}
	shape, err := s.seg.TagShape(ctx, tag) // from memory: see NextID
	if err != nil {
		return nil, s.statusError(ctx, tag, err)
	}
	resp := &leafv1.NextIDsResponse{Ids: ids, Period: period}
	if !shape.Format.IsPlain() {
		// One ID the format cannot write fails the whole answer.
		resp.Formatted = make([]string, len(ids))
		for i, id := range ids {
			if resp.Formatted[i], err = tagshape.Format(shape.Format, period, id); err != nil {
				return nil, s.statusError(ctx, tag, apierr.FormatError(tag, err))
			}
		}
	}
	return resp, nil
}

// Range leases a contiguous range of segment IDs.
func (s *service) Range(ctx context.Context, req *leafv1.RangeRequest) (*leafv1.RangeResponse, error) {
	tag := req.GetTag()
	n := int(req.GetCount())
	check := s.segmentTag(tag)
	if check == nil {
		check = apierr.AsClient(leaf.ValidateRangeCount(n))
	}
	if err := s.admit(ctx, check); err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	run, err := s.seg.Take(ctx, tag, n, leaf.ByClient)
	if err == nil {
		err = run.Check(n)
	}
	if err != nil {
		return nil, s.statusError(ctx, tag, err)
	}
	return &leafv1.RangeResponse{Start: run.Start, End: run.End, Period: run.Period}, nil
}

// SnowflakeNextID issues one snowflake ID.
func (s *service) SnowflakeNextID(ctx context.Context, req *leafv1.SnowflakeNextIDRequest) (*leafv1.SnowflakeNextIDResponse, error) {
	key := req.GetKey()
	if err := s.admit(ctx, s.snowflakeKey(key)); err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	id, err := s.snow.NextID(ctx, key)
	if err == nil {
		err = validateID(id)
	}
	if err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	return &leafv1.SnowflakeNextIDResponse{Id: id}, nil
}

// SnowflakeNextIDs issues a batch of snowflake IDs.
func (s *service) SnowflakeNextIDs(ctx context.Context, req *leafv1.SnowflakeNextIDsRequest) (*leafv1.SnowflakeNextIDsResponse, error) {
	key := req.GetKey()
	n, err := s.admitBatch(ctx, s.snowflakeKey(key), req.GetCount())
	if err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	ids, err := s.snow.NextIDs(ctx, key, n, make([]int64, 0, n))
	if err == nil {
		err = validateIDs(ids, n)
	}
	if err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	return &leafv1.SnowflakeNextIDsResponse{Ids: ids}, nil
}

// Decode takes a snowflake ID apart.
func (s *service) Decode(ctx context.Context, req *leafv1.DecodeRequest) (*leafv1.DecodeResponse, error) {
	if s.snow == nil {
		return nil, s.statusError(ctx, "", apierr.ErrSnowflakeDisabled)
	}
	id := req.GetId()
	if id < 1 {
		return nil, s.statusError(ctx, "", apierr.AsClient(fmt.Errorf("%w: snowflake ID %d is not positive", leaf.ErrInvalidArgument, id)))
	}
	p, err := s.snow.Decode(id)
	if errors.Is(err, leaf.ErrInvalidArgument) {
		// The client's error, in the service's words: the generator's may
		// say more than the client needs.
		err = apierr.AsClient(fmt.Errorf("%w: snowflake ID %d cannot have been issued with this server's layout (its time or worker is out of range)",
			leaf.ErrInvalidArgument, id))
	}
	if err != nil {
		return nil, s.statusError(ctx, "", err)
	}
	return &leafv1.DecodeResponse{Id: p.ID, TimestampMs: p.Timestamp, WorkerId: p.WorkerID, Sequence: p.Sequence}, nil
}

// segmentTag checks a segment request before the generator sees it: segment
// mode on, tag valid.
func (s *service) segmentTag(tag string) error {
	if s.seg == nil {
		return apierr.ErrSegmentDisabled
	}
	return apierr.AsClient(leaf.ValidateTag(tag))
}

// snowflakeKey checks a snowflake request: snowflake mode on, and the key, if
// any, a valid tag name. The generator ignores the key, as Leaf's does; it is
// checked all the same so that a key that reaches a log is always a plain
// tag. Unlike the HTTP routes' {key}, it may be empty: the field is optional.
func (s *service) snowflakeKey(key string) error {
	if s.snow == nil {
		return apierr.ErrSnowflakeDisabled
	}
	if key == "" {
		return nil
	}
	return apierr.AsClient(leaf.ValidateTag(key))
}

// admit runs a request's checks (segmentTag or snowflakeKey) and, if they
// pass, the client's rate limit: a bad request costs the client nothing.
func (s *service) admit(ctx context.Context, check error) error {
	if check != nil {
		return check
	}
	return s.limit(ctx)
}

// admitBatch is admit with a count of 1..leaf.MaxBatch, checked before the
// limit too.
func (s *service) admitBatch(ctx context.Context, check error, count int32) (int, error) {
	n := int(count)
	if check == nil {
		check = apierr.AsClient(leaf.ValidateCount(n))
	}
	return n, s.admit(ctx, check)
}

// checkID and checkIDs refuse a generator's answer that breaks its
// contract: a bug must become Internal, never IDs with OK.
func validateID(id int64) error { return brokenGenerator(leaf.ValidateID(id)) }

func validateIDs(ids []int64, n int) error { return brokenGenerator(leaf.ValidateIDs(ids, n)) }

func brokenGenerator(err error) error {
	if err != nil {
		return fmt.Errorf("grpcapi: the generator answered without an error: %w", err)
	}
	return nil
}

// limit checks the caller against the limiter; nil when it may be served. A
// peer without an IP address (a Unix socket, an in-memory listener) is not
// limited.
func (s *service) limit(ctx context.Context) error {
	if s.lim == nil {
		return nil
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	a, ok := p.Addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	if ok, wait := s.lim.Allow(a.AddrPort().Addr()); !ok {
		return apierr.AsClient(&apierr.RateLimitedError{Wait: wait})
	}
	return nil
}
