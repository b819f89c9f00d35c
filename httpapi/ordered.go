package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/ordered/forward"
)

// Ordered tags. An ordered tag's IDs are issued by one server at a time,
// its owner (leaf.OrderedStore). What this package does about it:
//
//   - The ID routes serve them like any tag: the forwarder they are given
//     (Config.Forward; cmd/leaf gives them ordered/forward's in forward
//     mode) issues the IDs, here or at the owner. Without one, the
//     generator's *leaf.NotOwnerError naming the owner (redirect mode) makes
//     the answer a 307 to the same route on the owner; one naming none is 503
//     "no_owner" with a Retry-After of when a server takes the tag over.
//   - /v2/segment/{tag}/range refuses an ordered tag (409 "ordered_tag"):
//     a client's cache would hand its IDs out of order. A request with
//     the Leaf-Forward header is another server's forwarded batch: it is
//     served from the tag's ordered sequence (OrderedGenerator), never
//     forwarded or redirected again (409 "not_owner", 503 "no_owner"
//     from a server that is not the owner), needs the admin token when
//     one is set, and is not rate limited (its clients were, at the
//     server that forwarded them).
//   - POST /v2/tags takes "ordered": true, PATCH /v2/tags/{tag}
//     "ordered": true|false; the rows show "ordered" and, for one tag,
//     the owner's URL.

// OrderedGenerator is what ordered tags need beyond SegmentGenerator
// (whose Take by leaf.ByForwarder issues the forwarded requests' IDs): the
// generator's ordered tags, *ordered.Tags (Config.Ordered). Without it,
// forwarded requests are refused and tags cannot be made ordered.
type OrderedGenerator interface {
	// SetOrdered marks a tag ordered or plain.
	SetOrdered(ctx context.Context, tag string, ordered bool) error
}

// ownerRedirect is the owner's base URL when err is a *leaf.NotOwnerError
// naming one, else "". A request for an ordered tag the generator did not
// forward goes there: the same route and query, answered 307.
func ownerRedirect(err error) string {
	if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok {
		return noe.URL
	}
	return ""
}

// isForwarded reports whether r is another server's forwarded request.
func isForwarded(r *http.Request) bool { return r.Header.Get(forward.Header) != "" }

// v2SegmentRangeRoute serves /v2/segment/{tag}/range: a client's lease
// (v2SegmentRange, rate limited), or another server's forwarded batch.
func (s *Server) v2SegmentRangeRoute(w http.ResponseWriter, r *http.Request) error {
	if isForwarded(r) {
		return s.forwardedRange(w, r)
	}
	if err := s.limit(r.RemoteAddr); err != nil {
		return err
	}
	return s.v2SegmentRange(w, r)
}

// errNoOrdered refuses a forwarded request on a server whose generator
// serves no ordered tags: it owns none.
var errNoOrdered = fmt.Errorf("%w: this server serves no ordered tags", leaf.ErrNotOwner)

// forwardedRange serves a forwarded batch: [start, end) of the tag's
// ordered sequence, in the range route's body.
func (s *Server) forwardedRange(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	if !s.hasToken {
		// Without a token anyone can send the header: it must not also
		// be a way around the rate limit.
		if err := s.limit(r.RemoteAddr); err != nil {
			return err
		}
	}
	tag, err := s.segmentTag(r)
	if err != nil {
		return err
	}
	c, ok := queryValue(r.URL.RawQuery, "count")
	if !ok {
		return apierr.AsClient(fmt.Errorf("%w: the query parameter count is required (1..%d)", leaf.ErrInvalidCount, leaf.MaxRange))
	}
	n, err := leaf.ParseRangeCount(c)
	if err != nil {
		return apierr.AsClient(err)
	}
	if s.ord == nil {
		return errNoOrdered
	}
	if r.Method == http.MethodHead {
		return s.v2Head(w, r, s.segmentTagKnown(r.Context(), tag))
	}
	run, err := s.seg.Take(r.Context(), tag, n, leaf.ByForwarder)
	if err == nil {
		err = run.Check(n)
	}
	start, end := run.Start, run.End
	if err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, rangeResponse{
		Tag: tag, Start: start, End: end,
		StartStr: strconv.FormatInt(start, 10), EndStr: strconv.FormatInt(end, 10), Count: end - start,
	})
}

// setOrdered marks tag ordered or plain through the generator.
func (s *Server) setOrdered(ctx context.Context, tag string, ordered bool) error {
	if s.ord == nil {
		return errNoOrderedStore
	}
	return s.ord.SetOrdered(ctx, tag, ordered)
}

// errNoOrderedStore refuses to make a tag ordered where the generator or
// its store cannot.
var errNoOrderedStore = apierr.Client(leaf.ErrInvalidArgument, "ordered tags are not supported by this server's store")

// orderedStore is the store's lease table, for the rows' "ordered" and
// "owner"; nil when the store keeps none.
func (s *Server) orderedStore() leaf.OrderedStore {
	os, _ := s.tags.(leaf.OrderedStore)
	return os
}

// addOwner sets row's Ordered and Owner from the store (AddOwner).
func (s *Server) addOwner(ctx context.Context, row *TagRow) error {
	return AddOwner(ctx, s.orderedStore(), row)
}

// markOrdered sets the Ordered of a page of rows (MarkOrdered).
func (s *Server) markOrdered(ctx context.Context, rows []TagRow) error {
	return MarkOrdered(ctx, s.orderedStore(), rows)
}

// AddOwner sets row's Ordered from os (nil: a store without ordered tags)
// and, while a lease holds, its Owner's URL.
func AddOwner(ctx context.Context, os leaf.OrderedStore, row *TagRow) error {
	if os == nil {
		return nil
	}
	l, ok, err := os.TagLease(ctx, row.Tag)
	if err != nil {
		return err
	}
	row.Ordered = ok
	if ok && l.Held() {
		row.Owner = leaf.OwnerURL(l.Owner)
	}
	return nil
}

// MarkOrdered sets the Ordered of rows, a page in the store's order of
// biz_tag, from os's list of ordered tags (nil: a store without them): a
// few reads of the ordered tags within the page's bounds, not one per row.
func MarkOrdered(ctx context.Context, os leaf.OrderedStore, rows []TagRow) error {
	if os == nil || len(rows) == 0 {
		return nil
	}
	at := make(map[string]int, len(rows))
	for i, r := range rows {
		at[r.Tag] = i
	}
	last := rows[len(rows)-1].Tag
	// The store lists ordered tags in its order of names, as it lists
	// rows: start just before the page's first tag (a prefix of a name
	// sorts before it).
	first := rows[0].Tag
	after := first[:len(first)-1]
	const page = 1000
	for {
		ls, err := os.OrderedTags(ctx, after, page)
		if err != nil {
			return err
		}
		for _, l := range ls {
			if i, ok := at[l.Tag]; ok {
				rows[i].Ordered = true
			}
		}
		if len(ls) < page || ls[len(ls)-1].Tag >= last {
			return nil
		}
		after = ls[len(ls)-1].Tag
	}
}

// v2SegmentPrefix and rangeSuffix frame the range route's path.
const (
	v2SegmentPrefix = "/v2/segment/"
	rangeSuffix     = "/range"
	rangeRoute      = v2SegmentPrefix + "{tag}" + rangeSuffix
)

// fastForwardedRange serves a forwarded batch on the fast transport, as
// forwardedRange does through the net/http handler: the owner answers one
// per call of every server that forwards to it, so the call costs it no
// request adaptation, routing or reflection. It returns false, having
// written nothing, for a request it leaves to the handler: anything but a
// well-formed GET or POST from a server holding the token, for a
// generator that serves ordered tags, or, with no token but a rate limit,
// any forward; the handler then answers it, its errors included, in its
// words.
func (s *Server) fastForwardedRange(ctx *fasthttp.RequestCtx, path, query []byte) bool {
	if s.ord == nil || !(ctx.IsGet() || ctx.IsPost()) || !bytes.HasSuffix(path, []byte(rangeSuffix)) || !s.fastAdmin(ctx) ||
		(!s.hasToken && s.limiter != nil) { // the handler rate-limits a forward anyone could send
		return false
	}
	rawTag := path[len(v2SegmentPrefix) : len(path)-len(rangeSuffix)]
	if leaf.ValidateTag(b2s(rawTag)) != nil {
		return false
	}
	c, ok := queryValue(b2s(query), "count")
	if !ok {
		return false
	}
	n, err := leaf.ParseRangeCount(c)
	if err != nil {
		return false
	}
	tag := string(rawTag) // the generator may keep it
	run, err := s.seg.Take(requestContext, tag, n, leaf.ByForwarder)
	if err == nil {
		err = run.Check(n)
	}
	start, end := run.Start, run.End
	status := http.StatusOK
	h := &ctx.Response.Header
	h.SetCanonical(cacheControlKey, noStoreValue)
	h.SetContentTypeBytes(appJSONBytes)
	if err != nil {
		status = s.fastJSONError(ctx, tag, err)
	} else {
		buf := smallBufs.Get().(*[256]byte)
		b := append(buf[:0], `{"tag":"`...)
		b = append(b, tag...)
		b = append(b, `","start":`...)
		b = strconv.AppendInt(b, start, 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, end, 10)
		b = append(b, `,"start_str":"`...)
		b = strconv.AppendInt(b, start, 10)
		b = append(b, `","end_str":"`...)
		b = strconv.AppendInt(b, end, 10)
		b = append(b, `","count":`...)
		b = strconv.AppendInt(b, end-start, 10)
		ctx.Response.SetBody(append(b, "}\n"...)) // copied
		smallBufs.Put(buf)
	}
	if s.obs != nil {
		s.obs.ObserveRequest(rangeRoute, status, time.Since(ctx.Time()))
	}
	return true
}

var appJSONBytes = []byte(appJSON[0])

// fastAdmin is checkAdmin on the fast transport: true when no token is
// configured or the request carries it.
func (s *Server) fastAdmin(ctx *fasthttp.RequestCtx) bool {
	if !s.hasToken {
		return true
	}
	scheme, token, ok := bytes.Cut(ctx.Request.Header.Peek("Authorization"), []byte(" "))
	return ok && bytes.EqualFold(scheme, []byte("Bearer")) && s.tokenOK(b2s(token))
}

// fastJSONError answers err in the /v2 error style on the fast transport,
// as writeError does, and returns the status.
func (s *Server) fastJSONError(ctx *fasthttp.RequestCtx, tag string, err error) int {
	k, msg, id := s.answerFor(ctx, b2s(ctx.Method()), b2s(ctx.Path()), tag, err)
	h := &ctx.Response.Header
	h.Set("X-Content-Type-Options", noSniff[0])
	h.Set(requestIDHeader, id)
	if k.HTTP == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfter(err))
	}
	body, _ := json.Marshal(struct { // strings only: cannot fail
		Error     string `json:"error"`
		Code      string `json:"code"`
		RequestID string `json:"request_id"`
	}{msg, k.Code, id})
	ctx.SetStatusCode(k.HTTP)
	ctx.Response.SetBody(append(body, '\n'))
	return k.HTTP
}
