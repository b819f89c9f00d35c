package grpcapi_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leafgo/leaf/grpcapi"
	"github.com/leafgo/leaf/internal/ratelimit"
)

// countingLimiter refuses every call and records whom it was asked about.
type countingLimiter struct {
	mu   sync.Mutex
	seen map[netip.Addr]int
}

func (l *countingLimiter) Allow(c netip.Addr) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[c]++
	return false, 2500 * time.Millisecond
}

// TestRateLimit: the ID methods are limited per client address, after
// validation, with ResourceExhausted and a RetryInfo of the client's wait;
// Decode is not limited.
func TestRateLimit(t *testing.T) {
	lim := &countingLimiter{seen: map[netip.Addr]int{}}
	f := fakeGen{id: 42}
	c := client(t, grpcapi.Config{Segment: f, Snowflake: f, Limiter: lim})
	limited := []call{nextID("t"), nextIDs("t", 3), rangeOf("t", 3), snowflakeID(""), snowflakeIDs("", 3)}
	for _, call := range limited {
		got, err := call.do(ctxFor(t), c)
		st, _ := status.FromError(err)
		if got || st.Code() != codes.ResourceExhausted || st.Message() != "rate limit exceeded for this client; retry after 3s" ||
			retryDelay(st) != 2500*time.Millisecond {
			t.Errorf("%s: response %t, %v (RetryInfo %v); want ResourceExhausted with a 2.5s RetryInfo", call.name, got, err, retryDelay(st))
		}
	}
	// Bad requests are answered as such, before the limit; Decode is free.
	for _, call := range []call{nextID("bad tag"), nextIDs("t", 0), decode(42)} {
		_, err := call.do(ctxFor(t), c)
		if status.Code(err) == codes.ResourceExhausted {
			t.Errorf("%s was rate limited", call.name)
		}
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if len(lim.seen) != 1 || lim.seen[netip.MustParseAddr("127.0.0.1")] != len(limited) {
		t.Errorf("limiter asked %v, want 127.0.0.1 exactly %d times", lim.seen, len(limited))
	}
}

// TestRateLimitReal: with the real limiter a client gets its burst, then
// ResourceExhausted.
func TestRateLimitReal(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.Config{Rate: 0.001, Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	f := fakeGen{id: 42}
	c := client(t, grpcapi.Config{Segment: f, Snowflake: f, Limiter: lim})
	for i := range 5 {
		_, err := nextID("t").do(ctxFor(t), c)
		want := codes.OK
		if i >= 3 {
			want = codes.ResourceExhausted
		}
		if status.Code(err) != want {
			t.Errorf("call %d: %v, want %s", i, err, want)
		}
	}
}
