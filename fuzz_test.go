package leaf_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
)

// tagAlphabet is the documented tag alphabet (SPEC §2, docs/api.md "Errors"), written out
// here rather than derived from IsTagByte so that the two can disagree.
const tagAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"

// tagRule is the documented tag rule, 1–128 bytes of tagAlphabet. The class
// is ASCII only, so its rune count is a byte count.
var tagRule = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// recorder stands in for the generators behind the HTTP routes: it keeps
// every key it is asked for and answers increasing IDs, so that a test can
// see exactly what reached a generator.
type recorder struct {
	keys []string
	next int64
}

func (r *recorder) take(key string, n int, dst []int64) []int64 {
	r.keys = append(r.keys, key)
	for range n {
		r.next++
		dst = append(dst, r.next)
	}
	return dst
}

// segRecorder and snowRecorder are recorder as each generator interface.
// The embedded interfaces are nil: the Leaf ID routes call only the ID
// methods (the segment generator's with their period, which they drop),
// and anything else panics, which the fuzzer reports.
type segRecorder struct {
	httpapi.SegmentGenerator
	*recorder
}

func (g segRecorder) NextIDPeriod(_ context.Context, key string) (int64, string, error) {
	return g.take(key, 1, nil)[0], "", nil
}

func (g segRecorder) NextIDsPeriod(_ context.Context, key string, n int, dst []int64) ([]int64, string, error) {
	return g.take(key, n, dst), "", nil
}

type snowRecorder struct {
	httpapi.SnowflakeGenerator
	*recorder
}

func (g snowRecorder) NextID(_ context.Context, key string) (int64, error) {
	return g.take(key, 1, nil)[0], nil
}

func (g snowRecorder) NextIDs(_ context.Context, key string, n int, dst []int64) ([]int64, error) {
	return g.take(key, n, dst), nil
}

// idServer is a Server over one recorder, and the fasthttp handler
// NewFastServer puts in front of it.
type idServer struct {
	rec  *recorder
	srv  *httpapi.Server
	fast fasthttp.RequestHandler
}

func newIDServer() *idServer {
	rec := &recorder{}
	srv := httpapi.New(httpapi.Config{
		Segment:   segRecorder{recorder: rec},
		Snowflake: snowRecorder{recorder: rec},
		Logger:    slog.New(slog.DiscardHandler),
	})
	return &idServer{rec: rec, srv: srv, fast: httpapi.NewFastServer(srv, httpapi.Limits{}).Handler}
}

// get sends GET target (path and raw query, as on the request line) to
// the net/http handler.
func (s *idServer) get(t *testing.T, target string) (int, string) {
	t.Helper()
	u, err := url.ParseRequestURI(target)
	if err != nil {
		t.Fatalf("test built a bad target %q: %v", target, err)
	}
	r := &http.Request{Method: "GET", URL: u, RequestURI: target, Header: http.Header{}, Host: "leaf",
		Body: http.NoBody, RemoteAddr: "127.0.0.1:1"}
	w := httptest.NewRecorder()
	s.srv.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// getFast sends GET target to the fasthttp handler, on ctx, which the
// caller may reuse to see whether anything kept a view of its buffers.
func (s *idServer) getFast(ctx *fasthttp.RequestCtx, target string) (int, string) {
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI(target)
	ctx.Init(&req, nil, nil)
	// Init keeps the previous response; fasthttp's server resets it
	// between requests, and so must a caller reusing ctx.
	ctx.Response.Reset()
	s.fast(ctx)
	return ctx.Response.StatusCode(), string(ctx.Response.Body())
}

// maxTagErrorLen bounds the messages of ValidateTag and ParseCount whatever
// the input's length: they quote at most 40 bytes of it, each \xNN at worst.
const maxTagErrorLen = 300

// FuzzValidateTag holds ValidateTag to the documented rule, and follows an
// accepted tag through both HTTP transports to the generator.
//
// Properties: ValidateTag accepts exactly what tagRule matches, and
// IsTagByte is tagAlphabet; a refusal wraps ErrInvalidTag in one short line
// naming the first bad byte; /api/segment/get/<tag> and
// /api/snowflake/get/<tag> hand an accepted tag to the generator unchanged
// (as a string of its own, not a view of fasthttp's buffer) and answer its
// ID, and answer 400 to a refused tag without calling the generator.
func FuzzValidateTag(f *testing.F) {
	for _, tag := range []string{
		"leaf-segment-test", "A.b_c:d-9", strings.Repeat("x", leaf.MaxTagLen), strings.Repeat("x", leaf.MaxTagLen+1),
		"", "a b", "a/b", "a%2Fb", "ünicode", "tab\t", "nul\x00", ".", "..", ".hidden", "a?b", "a#b", "-", ":",
		"tag'; DROP TABLE leaf_alloc; --", "a\r\nX-Injected: 1",
	} {
		f.Add(tag)
	}
	for c := range 256 {
		if leaf.IsTagByte(byte(c)) != strings.ContainsRune(tagAlphabet, rune(c)) {
			f.Fatalf("IsTagByte(%#02x) = %v, against the documented alphabet", c, leaf.IsTagByte(byte(c)))
		}
	}
	s := newIDServer()
	var ctx fasthttp.RequestCtx
	f.Fuzz(func(t *testing.T, tag string) {
		err := leaf.ValidateTag(tag)
		valid := tagRule.MatchString(tag)
		if valid != (err == nil) {
			t.Fatalf("ValidateTag(%q) = %v, the documented rule says valid=%v", tag, err, valid)
		}
		firstBad := -1
		for i := 0; i < len(tag); i++ {
			if !leaf.IsTagByte(tag[i]) {
				firstBad = i
				break
			}
		}
		if !valid {
			msg := err.Error()
			if !errors.Is(err, leaf.ErrInvalidTag) || msg == "" || strings.ContainsAny(msg, "\r\n") || len(msg) > maxTagErrorLen {
				t.Fatalf("ValidateTag(%q) = %q: want one short line wrapping ErrInvalidTag", tag, msg)
			}
			if len(tag) >= 1 && len(tag) <= leaf.MaxTagLen && !strings.Contains(msg, "at offset "+strconv.Itoa(firstBad)) {
				t.Fatalf("ValidateTag(%q) = %q: does not name offset %d, the first bad byte", tag, msg, firstBad)
			}
		}

		for _, prefix := range []string{"/api/segment/get/", "/api/snowflake/get/"} {
			// The tag is escaped as a client would send it; an accepted tag
			// needs no escaping at all.
			target := prefix + url.PathEscape(tag)
			if valid && target != prefix+tag {
				t.Fatalf("PathEscape changed the valid tag %q", tag)
			}
			s.rec.keys = s.rec.keys[:0]
			code, body := s.get(t, target)
			checkTagAnswer(t, "net/http", target, tag, valid, code, body, s.rec)

			s.rec.keys = s.rec.keys[:0]
			code, body = s.getFast(&ctx, target)
			checkTagAnswer(t, "fasthttp", target, tag, valid, code, body, s.rec)
			if valid {
				// Reuse the request's buffers for another URI of the same
				// length: a key that aliased them would change with it.
				s.getFast(&ctx, "/"+strings.Repeat("z", len(target)-1))
				if s.rec.keys[0] != tag {
					t.Fatalf("fasthttp: the generator's key %q changed under it to %q: it aliases the request buffer", tag, s.rec.keys[0])
				}
			}
		}
	})
}

// checkTagAnswer checks the answer to GET target for tag.
func checkTagAnswer(t *testing.T, transport, target, tag string, valid bool, code int, body string, rec *recorder) {
	t.Helper()
	if !valid {
		if code != http.StatusBadRequest || len(rec.keys) != 0 || !strings.Contains(body, "invalid tag") {
			t.Fatalf("%s: GET %s = %d %q, generator called with %q; want 400 invalid tag and no call", transport, target, code, body, rec.keys)
		}
		return
	}
	if code != http.StatusOK || len(rec.keys) != 1 || rec.keys[0] != tag || body != strconv.FormatInt(rec.next, 10) {
		t.Fatalf("%s: GET %s = %d %q, generator called with %q; want 200 %d and exactly the key %q", transport, target, code, body, rec.keys, rec.next, tag)
	}
}

// FuzzParseCount holds ParseCount, which reads ?count= on the ID routes, to
// strconv's decimal integers in 1..MaxBatch, and checks that both transports
// answer the same to ?count=<s>: that many IDs one per line, or 400.
func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"1", "10000", "0", "10001", "-1", "+5", "007", "", " 1", "1 ", "abc", "1e3", "0x10", "1_000",
		"99999999999999999999", "-9223372036854775808", "٣"} {
		f.Add(s)
	}
	s := newIDServer()
	var ctx fasthttp.RequestCtx
	f.Fuzz(func(t *testing.T, in string) {
		n, err := leaf.ParseCount(in)
		ref, rerr := strconv.ParseInt(in, 10, 64)
		ok := rerr == nil && ref >= 1 && ref <= leaf.MaxBatch
		if ok != (err == nil) || ok && int64(n) != ref {
			t.Fatalf("ParseCount(%q) = %d, %v; strconv says %d, %v", in, n, err, ref, rerr)
		}
		if err != nil {
			msg := err.Error()
			if !errors.Is(err, leaf.ErrInvalidCount) || strings.ContainsAny(msg, "\r\n") || len(msg) > maxTagErrorLen {
				t.Fatalf("ParseCount(%q) error %q: want one short line wrapping ErrInvalidCount", in, msg)
			}
		}

		target := "/api/segment/get/t?count=" + url.QueryEscape(in)
		netCode, netBody := s.get(t, target)
		fastCode, fastBody := s.getFast(&ctx, target)
		for _, a := range []struct {
			transport, body string
			code            int
		}{{"net/http", netBody, netCode}, {"fasthttp", fastBody, fastCode}} {
			if !ok {
				if a.code != http.StatusBadRequest || !strings.HasPrefix(a.body, "invalid count: ") || !strings.HasSuffix(a.body, "\n") {
					t.Fatalf("%s: GET %s = %d %q, want 400 invalid count", a.transport, target, a.code, a.body)
				}
				continue
			}
			lines := strings.Split(a.body, "\n")
			if a.code != http.StatusOK || len(lines) != n {
				t.Fatalf("%s: GET %s = %d with %d lines, want 200 and %d IDs", a.transport, target, a.code, len(lines), n)
			}
		}
		if netCode == http.StatusBadRequest && netBody != fastBody {
			t.Fatalf("GET %s: net/http says %q, fasthttp %q", target, netBody, fastBody)
		}
	})
}
