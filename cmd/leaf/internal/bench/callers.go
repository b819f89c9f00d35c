package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/grpcapi/leafv1"
)

// maxBody caps an HTTP answer: 10,000 IDs of 19 digits and a newline each,
// with room to spare.
const maxBody = 1 << 20

// grpcConns is how many gRPC connections the workers share, round robin.
// One HTTP/2 connection funnels every frame through one writer and one
// reader goroutine on each side; a few spread that without opening one
// connection per worker as HTTP/1.1 must.
const grpcConns = 4

// failure is why one request did not count: kind groups failures in
// the summary ("http 503", "grpc Unavailable", "transport timeout", "bad
// body"), detail is an example message.
type failure struct{ kind, detail string }

// caller makes one request and appends the IDs it got to ids. Each
// worker has its own; a caller is not safe for concurrent use.
type caller interface {
	call(ctx context.Context, ids []int64) ([]int64, *failure)
}

// newCallers returns a constructor of callers sharing one client (HTTP)
// or a few connections (gRPC), and a function that closes them.
func newCallers(o *Config) (newCaller func() caller, closeAll func(), err error) {
	if o.GRPC != "" {
		return grpcCallers(o)
	}
	return httpCallers(o)
}

// httpCallers uses fasthttp rather than net/http: its HostClient reuses
// request and response objects and their buffers, so a request allocates
// nothing, where net/http allocates a few KB per request (request, header
// maps, response, body reader). On a small machine where generator and
// server share the cores, the generator's CPU is taken from the server, so
// a cheaper client measures more of the server. MaxConns is the
// concurrency: each worker has a connection to itself, as wrk's do.
func httpCallers(o *Config) (func() caller, func(), error) {
	isTLS := o.URL.Scheme == "https"
	hc := &fasthttp.HostClient{
		Addr:      fasthttp.AddMissingPort(o.URL.Host, isTLS),
		IsTLS:     isTLS,
		TLSConfig: o.TLS,
		Name:      "leaf-bench",
		MaxConns:  o.Concurrency,
		// Never retry behind our back: a failed request is a result.
		MaxIdemponentCallAttempts: 1,
		ReadTimeout:               requestTimeout,
		WriteTimeout:              requestTimeout,
		MaxResponseBodySize:       maxBody,
		MaxIdleConnDuration:       time.Minute,
	}
	kind := "segment"
	if o.Mode == "snowflake" {
		kind = "snowflake"
	}
	u := o.URL.JoinPath("api", kind, "get", o.Tag)
	if o.Count != 1 {
		u.RawQuery = "count=" + strconv.Itoa(o.Count)
	}
	uri := u.String()
	newCaller := func() caller {
		req := fasthttp.AcquireRequest()
		req.SetRequestURI(uri)
		req.Header.SetMethod(fasthttp.MethodGet)
		return &httpCaller{hc: hc, req: req, resp: fasthttp.AcquireResponse()}
	}
	return newCaller, hc.CloseIdleConnections, nil
}

type httpCaller struct {
	hc   *fasthttp.HostClient
	req  *fasthttp.Request
	resp *fasthttp.Response
}

func (c *httpCaller) call(_ context.Context, ids []int64) ([]int64, *failure) {
	if err := c.hc.Do(c.req, c.resp); err != nil {
		return ids, transportFailure(err)
	}
	body := c.resp.Body()
	if code := c.resp.StatusCode(); code != fasthttp.StatusOK {
		return ids, &failure{kind: "http " + strconv.Itoa(code), detail: truncate(strings.TrimSpace(string(body)), 200)}
	}
	ids, err := parseIDLines(body, ids)
	if err != nil {
		return ids, &failure{kind: "bad body", detail: err.Error()}
	}
	return ids, nil
}

// transportFailure names a failed exchange by its cause.
func transportFailure(err error) *failure {
	kind := "transport"
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = "transport timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = "transport connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		kind = "transport connection reset"
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		kind = "transport connection closed"
	}
	return &failure{kind: kind, detail: truncate(err.Error(), 200)}
}

// parseIDLines appends to ids the decimal IDs of body, one per line (Leaf's
// batch format; a single trailing newline is accepted). An ID must be in
// 1..2^63-1.
func parseIDLines(body []byte, ids []int64) ([]int64, error) {
	if len(body) > 0 && body[len(body)-1] == '\n' {
		body = body[:len(body)-1]
	}
	if len(body) == 0 {
		return ids, errors.New("empty body")
	}
	for line := 1; ; line++ {
		var id uint64
		i := 0
		for ; i < len(body) && body[i] != '\n'; i++ {
			d := body[i] - '0'
			if d > 9 || id > (math.MaxInt64-uint64(d))/10 {
				return ids, fmt.Errorf("line %d: not an ID: %q", line, truncate(string(body[:min(len(body), 40)]), 40))
			}
			id = id*10 + uint64(d)
		}
		if i == 0 || id == 0 {
			return ids, fmt.Errorf("line %d: not an ID: %q", line, string(body[:i]))
		}
		ids = append(ids, int64(id))
		if i == len(body) {
			return ids, nil
		}
		body = body[i+1:]
	}
}

func grpcCallers(o *Config) (func() caller, func(), error) {
	conns := make([]leafv1.LeafClient, 0, grpcConns)
	var closers []*grpc.ClientConn
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
	}
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	for range min(o.Concurrency, grpcConns) {
		// NewClient only parses the target; connecting is lazy, so an
		// unreachable server shows in the probe request.
		cc, err := grpc.NewClient(o.GRPC, grpc.WithTransportCredentials(creds))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%w: gRPC server %q: %v", leaf.ErrInvalidArgument, o.GRPC, err)
		}
		closers = append(closers, cc)
		conns = append(conns, leafv1.NewLeafClient(cc))
	}
	n := 0
	newCaller := func() caller {
		c := &grpcCaller{client: conns[n%len(conns)], segment: o.Mode == "segment", count: o.Count}
		n++
		c.nextID = &leafv1.NextIDRequest{Tag: o.Tag}
		c.nextIDs = &leafv1.NextIDsRequest{Tag: o.Tag, Count: int32(o.Count)}
		c.sfID = &leafv1.SnowflakeNextIDRequest{Key: o.Tag}
		c.sfIDs = &leafv1.SnowflakeNextIDsRequest{Key: o.Tag, Count: int32(o.Count)}
		return c
	}
	return newCaller, closeAll, nil
}

type grpcCaller struct {
	client  leafv1.LeafClient
	segment bool
	count   int
	// The requests never change; built once.
	nextID  *leafv1.NextIDRequest
	nextIDs *leafv1.NextIDsRequest
	sfID    *leafv1.SnowflakeNextIDRequest
	sfIDs   *leafv1.SnowflakeNextIDsRequest
}

func (c *grpcCaller) call(ctx context.Context, ids []int64) ([]int64, *failure) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var err error
	switch {
	case c.segment && c.count == 1:
		var r *leafv1.NextIDResponse
		if r, err = c.client.NextID(ctx, c.nextID); err == nil {
			ids = append(ids, r.GetId())
		}
	case c.segment:
		var r *leafv1.NextIDsResponse
		if r, err = c.client.NextIDs(ctx, c.nextIDs); err == nil {
			ids = append(ids, r.GetIds()...)
		}
	case c.count == 1:
		var r *leafv1.SnowflakeNextIDResponse
		if r, err = c.client.SnowflakeNextID(ctx, c.sfID); err == nil {
			ids = append(ids, r.GetId())
		}
	default:
		var r *leafv1.SnowflakeNextIDsResponse
		if r, err = c.client.SnowflakeNextIDs(ctx, c.sfIDs); err == nil {
			ids = append(ids, r.GetIds()...)
		}
	}
	if err != nil {
		// A failure that is not a status (none is expected from the
		// generated client) converts to Unknown.
		s := status.Convert(err)
		return ids, &failure{kind: "grpc " + s.Code().String(), detail: truncate(s.Message(), 200)}
	}
	return ids, nil
}

// checkIDs checks an answer against what every answer must be: count
// positive IDs, strictly increasing.
func checkIDs(ids []int64, count int) *failure {
	if len(ids) != count {
		return &failure{kind: "wrong count", detail: fmt.Sprintf("%d IDs, asked for %d", len(ids), count)}
	}
	for i, id := range ids {
		if id <= 0 {
			return &failure{kind: "bad ID", detail: fmt.Sprintf("ID %d", id)}
		}
		if i > 0 && id <= ids[i-1] {
			return &failure{kind: "not increasing", detail: fmt.Sprintf("%d after %d", id, ids[i-1])}
		}
	}
	return nil
}

// truncate shortens an example message for the summary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
