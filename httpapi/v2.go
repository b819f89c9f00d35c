package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/ordered/forward"
	"github.com/leafgo/leaf/tagshape"
)

// defaultStep is the step of POST /v2/tags without one. Without a start, the
// store chooses it: above every ID issued under a deleted tag of the same
// name, else 1 (leaf.SegmentAdmin).
const defaultStep = 1000

// maxBodyBytes bounds a /v2 request body. The largest valid one (a tag
// creation with a 256-byte description) is well under 1 KiB.
const maxBodyBytes = 64 << 10

// segmentTag returns the {tag} of a /v2 segment route, or the error to answer
// with when segment mode is off or the tag is invalid.
func (s *Server) segmentTag(r *http.Request) (string, error) {
	if s.seg == nil {
		return "", apierr.ErrSegmentDisabled
	}
	tag := r.PathValue("tag")
	return tag, validTag(tag)
}

// tagsOn is nil when the tag administration routes are served, else the
// error to answer them with: segment mode or tag administration is off.
func (s *Server) tagsOn() error {
	if s.seg == nil {
		return apierr.ErrSegmentDisabled
	}
	if s.tags == nil {
		return apierr.ErrTagsDisabled
	}
	return nil
}

// adminTag returns the {tag} of a /v2/tags/{tag} route, or the error to
// answer with (see tagsOn; an invalid tag).
func (s *Server) adminTag(r *http.Request) (string, error) {
	if err := s.tagsOn(); err != nil {
		return "", err
	}
	tag := r.PathValue("tag")
	return tag, validTag(tag)
}

// v2SegmentID serves /v2/segment/{tag}: {"tag":"t","id":123,"id_str":"123"},
// with "period" for a periodic tag and "formatted" for one with a format.
// The body is formatted by hand: the tag is validated to bytes that need no
// JSON escaping, and encoding/json would cost several allocations per ID.
func (s *Server) v2SegmentID(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.segmentTag(r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		return s.v2Head(w, r, s.segmentTagKnown(r.Context(), tag))
	}
	id, period, owner, err := s.nextIDVia(r.Context(), tag)
	if err == nil {
		err = validateID(id)
	}
	if err != nil {
		return err
	}
	// After the ID: the generator read the shape at the tag's first load,
	// so this is from memory, and a failing store fails the request as the
	// generator words it.
	shape, err := s.seg.TagShape(r.Context(), tag)
	if err != nil {
		return err
	}
	setOwner(w, owner)
	buf := smallBufs.Get().(*[256]byte)
	defer smallBufs.Put(buf)
	b := append(buf[:0], `{"tag":"`...)
	b = append(b, tag...)
	b = append(b, `",`...)
	b = appendIDJSON(b, id)
	b = appendPeriodJSON(b, period)
	if !shape.Format.IsPlain() {
		if b, err = appendFormattedJSON(b, tag, shape.Format, period, id); err != nil {
			return err
		}
	}
	writeBody(w, r, http.StatusOK, appJSON, append(b, "}\n"...))
	return nil
}

// Forwarder issues segment IDs here, or at the owner of an ordered tag
// another server owns, and names the owner an answer's IDs came from: ""
// when they were issued here. ordered/forward's Forwarder satisfies it.
type Forwarder interface {
	NextIDVia(ctx context.Context, tag string) (id int64, period, owner string, err error)
	NextIDsVia(ctx context.Context, tag string, n int, dst []int64) (ids []int64, period, owner string, err error)
}

// nextIDVia is the generator's NextIDPeriod, and the owner the ID came
// from when it forwards.
func (s *Server) nextIDVia(ctx context.Context, tag string) (int64, string, string, error) {
	if s.via != nil {
		return s.via.NextIDVia(ctx, tag)
	}
	id, period, err := s.seg.NextIDPeriod(ctx, tag)
	return id, period, "", err
}

// nextIDsVia is nextIDVia for n IDs.
func (s *Server) nextIDsVia(ctx context.Context, tag string, n int, dst []int64) ([]int64, string, string, error) {
	if s.via != nil {
		return s.via.NextIDsVia(ctx, tag, n, dst)
	}
	ids, period, err := s.seg.NextIDsPeriod(ctx, tag, n, dst)
	return ids, period, "", err
}

// setOwner names the owner of an ordered tag on an answer whose IDs were
// forwarded to it (forward.OwnerHeader), for clients that route to owners;
// a redirect to the owner names it too (writeError).
func setOwner(w http.ResponseWriter, url string) {
	if url != "" {
		w.Header()[forward.OwnerHeader] = []string{url}
	}
}

// v2Head answers HEAD on a /v2 ID route, which the mux hands to the GET
// handler, once the request is validated: see headID. known is nil when GET
// would be served, else its error, answered in JSON by the caller.
func (s *Server) v2Head(w http.ResponseWriter, r *http.Request, known error) error {
	if known != nil {
		return known
	}
	s.headID(w, r, jsonStyle, appJSON, nil)
	return nil
}

// appendIDJSON appends the members "id":N,"id_str":"N" of a single-ID body.
// id_str is there for JavaScript, whose numbers lose IDs above 2^53.
func appendIDJSON(b []byte, id int64) []byte {
	b = append(b, `"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"id_str":"`...)
	b = strconv.AppendInt(b, id, 10)
	return append(b, '"')
}

// appendPeriodJSON appends the member ,"period":"KEY" of a periodic tag's
// answer; nothing for a plain tag. A key is digits only.
func appendPeriodJSON(b []byte, period string) []byte {
	if period == "" {
		return b
	}
	b = append(b, `,"period":"`...)
	b = append(b, period...)
	return append(b, '"')
}

// appendIDsJSON appends the members "ids":[...],"ids_str":[...] of a batch
// body.
func appendIDsJSON(b []byte, ids []int64) []byte {
	b = append(b, `"ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	b = append(b, `],"ids_str":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, id, 10)
		b = append(b, '"')
	}
	return append(b, ']')
}

// v2SegmentBatch serves /v2/segment/{tag}/batch?count=N:
// {"tag":"t","ids":[1,2],"ids_str":["1","2"]}. count is required.
func (s *Server) v2SegmentBatch(w http.ResponseWriter, r *http.Request) error {
	tag, n, err := s.segmentTagCount(r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		return s.v2Head(w, r, s.segmentTagKnown(r.Context(), tag))
	}
	p := idBufs.Get().(*[]int64)
	ids, period, owner, err := s.nextIDsVia(r.Context(), tag, n, (*p)[:0])
	if err == nil {
		err = validateIDs(ids, n)
	}
	if err != nil {
		idBufs.Put(p)
		return err
	}
	defer putIDs(p, ids)
	shape, err := s.seg.TagShape(r.Context(), tag) // from memory: see v2SegmentID
	if err != nil {
		return err
	}
	setOwner(w, owner)
	bp := batchBufs.Get().(*[]byte)
	b := append((*bp)[:0], `{"tag":"`...)
	b = append(b, tag...)
	b = append(b, `",`...)
	b = appendIDsJSON(b, ids)
	b = appendPeriodJSON(b, period)
	if !shape.Format.IsPlain() {
		if b, err = appendFormattedsJSON(b, tag, shape.Format, period, ids); err != nil {
			*bp = b
			batchBufs.Put(bp)
			return err
		}
	}
	b = append(b, "}\n"...)
	writeBody(w, r, http.StatusOK, appJSON, b)
	*bp = b
	batchBufs.Put(bp)
	return nil
}

// The /v2 snowflake routes have no key; they pass the generator this one,
// which it ignores.
const noKey = ""

// v2SnowflakeID serves /v2/snowflake: {"id":123,"id_str":"123"}, formatted by
// hand like /v2/segment/{tag}.
func (s *Server) v2SnowflakeID(w http.ResponseWriter, r *http.Request) error {
	if s.snow == nil {
		return apierr.ErrSnowflakeDisabled
	}
	if r.Method == http.MethodHead {
		return s.v2Head(w, r, nil)
	}
	id, err := s.snow.NextID(r.Context(), noKey)
	if err == nil {
		err = validateID(id)
	}
	if err != nil {
		return err
	}
	buf := smallBufs.Get().(*[256]byte)
	b := appendIDJSON(append(buf[:0], '{'), id)
	writeBody(w, r, http.StatusOK, appJSON, append(b, "}\n"...))
	smallBufs.Put(buf)
	return nil
}

// v2SnowflakeBatch serves /v2/snowflake/batch?count=N:
// {"ids":[1,2],"ids_str":["1","2"]}. count is required.
func (s *Server) v2SnowflakeBatch(w http.ResponseWriter, r *http.Request) error {
	if s.snow == nil {
		return apierr.ErrSnowflakeDisabled
	}
	n, err := requiredCount(r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		return s.v2Head(w, r, nil)
	}
	p, ids, err := nextIDs(r, s.snowIDs, noKey, n)
	if err != nil {
		return err
	}
	defer putIDs(p, ids)
	bp := batchBufs.Get().(*[]byte)
	b := appendIDsJSON(append((*bp)[:0], '{'), ids)
	b = append(b, "}\n"...)
	writeBody(w, r, http.StatusOK, appJSON, b)
	*bp = b
	batchBufs.Put(bp)
	return nil
}

// decodeResponse is the body of /v2/snowflake/decode/{id}.
type decodeResponse struct {
	ID          int64  `json:"id"`
	IDStr       string `json:"id_str"`
	TimestampMs int64  `json:"timestamp_ms"`
	Time        string `json:"time"` // RFC 3339 in UTC, to the millisecond
	WorkerID    int64  `json:"worker_id"`
	Sequence    int64  `json:"sequence"`
}

// v2SnowflakeDecode serves /v2/snowflake/decode/{id}: the ID taken apart with
// the generator's layout.
func (s *Server) v2SnowflakeDecode(w http.ResponseWriter, r *http.Request) error {
	parts, err := s.decode("ID", r.PathValue("id"), true)
	if err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, decodeResponse{
		ID:          parts.ID,
		IDStr:       strconv.FormatInt(parts.ID, 10),
		TimestampMs: parts.Timestamp,
		Time:        time.UnixMilli(parts.Timestamp).UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		WorkerID:    parts.WorkerID,
		Sequence:    parts.Sequence,
	})
}

// rangeResponse is the body of /v2/segment/{tag}/range.
type rangeResponse struct {
	Tag      string `json:"tag"`
	Start    int64  `json:"start"`
	End      int64  `json:"end"`
	StartStr string `json:"start_str"`
	EndStr   string `json:"end_str"`
	Count    int64  `json:"count"`
	// Period is a periodic tag's period, which the whole range belongs to.
	Period string `json:"period,omitempty"`
}

// v2SegmentRange serves /v2/segment/{tag}/range?count=N: the contiguous IDs
// [start, end), leased to the client for it to hand out itself. The range may
// be shorter than N (it never spans two segments); count says how long it is.
// A tag with a format has no range: 400.
func (s *Server) v2SegmentRange(w http.ResponseWriter, r *http.Request) error {
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
	if r.Method == http.MethodHead {
		return s.v2Head(w, r, s.segmentTagKnown(r.Context(), tag))
	}
	run, err := s.seg.Take(r.Context(), tag, n, leaf.ByClient)
	if err == nil {
		err = run.Check(n)
	}
	start, end, period := run.Start, run.End, run.Period
	if err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, rangeResponse{
		Tag:      tag,
		Start:    start,
		End:      end,
		StartStr: strconv.FormatInt(start, 10),
		EndStr:   strconv.FormatInt(end, 10),
		Count:    end - start,
		Period:   period,
	})
}

// segmentTagCount reads the tag and the required count of the batch and
// range routes.
func (s *Server) segmentTagCount(r *http.Request) (string, int, error) {
	tag, err := s.segmentTag(r)
	if err != nil {
		return "", 0, err
	}
	n, err := requiredCount(r)
	return tag, n, err
}

// requiredCount parses the count query parameter, which /v2 batches require.
func requiredCount(r *http.Request) (int, error) {
	c, ok := queryValue(r.URL.RawQuery, "count")
	if !ok {
		return 0, apierr.AsClient(fmt.Errorf("%w: the query parameter count is required (1..%d)", leaf.ErrInvalidCount, leaf.MaxBatch))
	}
	return parseCount(c)
}

// statusResponse is the body of /v2/status. The segment member is present
// even when the mode is off, so that clients can rely on its shape. The
// snowflake member is the worker's state, which has no meaning without a
// worker: it is present only when snowflake mode is on.
type statusResponse struct {
	Version string `json:"version"`
	// Detail is false when an admin token is configured and the request
	// did not carry it, or the request asked for ?detail=0: tags and the
	// worker are left out, and the degraded reasons are the clients' words
	// (see clientReasons).
	Detail    bool          `json:"detail"`
	Segment   segmentStatus `json:"segment"`
	Snowflake *workerStatus `json:"snowflake,omitempty"`
}

type segmentStatus struct {
	Enabled bool `json:"enabled"`
	// Degraded holds at most maxReasons reasons, the generator's own
	// first; when there are more, DegradedCount counts them all.
	Degraded      []string    `json:"degraded"`
	DegradedCount int         `json:"degraded_count,omitempty"`
	Tags          []tagStatus `json:"tags"`
	// Next is the cursor of the next page of tags: ?after=NEXT, with the
	// same prefix and limit. Absent on the last page.
	Next string `json:"next,omitempty"`
	// Databases is, with the detail, every database of a store spread
	// over several; absent for a store of one database.
	Databases []DatabaseStatus `json:"databases,omitempty"`
}

// v2Status serves /v2/status. With detail, the tags are a page (see
// parsePage) of those the generator holds, sorted by tag.
func (s *Server) v2Status(w http.ResponseWriter, r *http.Request) error {
	detail, err := s.statusDetail(r)
	if err != nil {
		return err
	}
	q, err := parsePage(r)
	if err != nil {
		return err
	}
	resp := statusResponse{
		Version: s.version,
		Detail:  detail,
		Segment: segmentStatus{Degraded: []string{}, Tags: []tagStatus{}},
	}
	if s.seg != nil {
		resp.Segment.Enabled = true
		var n int
		resp.Segment.Degraded, n = reasons(s.seg.Degraded(), detail)
		if n > len(resp.Segment.Degraded) {
			resp.Segment.DegradedCount = n
		}
		if detail {
			page, next := statusPage(s.seg.Status(), q)
			resp.Segment.Tags, resp.Segment.Next = tagStatuses(page), next
			for i := range resp.Segment.Tags {
				s.addFormats(r.Context(), &resp.Segment.Tags[i])
			}
		}
		resp.Segment.Databases = s.databases(detail)
	}
	if s.snow != nil && detail {
		resp.Snowflake = newWorkerStatus(s.snow.Status())
	}
	return writeJSON(w, r, http.StatusOK, resp)
}

// tagsPage is the body of GET /v2/tags.
type tagsPage struct {
	Tags []TagRow `json:"tags"`
	// Next is the cursor of the next page: ?after=NEXT, with the same
	// prefix and limit. Absent on the last page.
	Next string `json:"next,omitempty"`
}

// v2ListTags serves GET /v2/tags: a page (see parsePage) of the rows, in
// the store's order of biz_tag.
func (s *Server) v2ListTags(w http.ResponseWriter, r *http.Request) error {
	if err := s.tagsOn(); err != nil {
		return err
	}
	q, err := parsePage(r)
	if err != nil {
		return err
	}
	page, next, err := s.allocsPage(r, q)
	if err != nil {
		return err
	}
	tags := make([]string, len(page))
	for i, a := range page {
		tags[i] = a.Tag
	}
	shapes, err := s.tags.TagShapes(r.Context(), tags)
	if err != nil {
		return err
	}
	rows := tagRows(page, shapes)
	if err := s.markOrdered(r.Context(), rows); err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, tagsPage{rows, next})
}

// allocsPage reads the page q of the store's rows, one more than the page
// to learn whether another follows.
func (s *Server) allocsPage(r *http.Request, q pageQuery) ([]leaf.Alloc, string, error) {
	rows, err := s.tags.AllocsPage(r.Context(), q.prefix, q.after, q.limit+1)
	if err != nil {
		return nil, "", err
	}
	if rows == nil {
		rows = []leaf.Alloc{}
	}
	page, next := cutPage(rows, q.limit, func(a leaf.Alloc) string { return a.Tag })
	return page, next, nil
}

// v2GetTag serves GET /v2/tags/{tag}: one row.
func (s *Server) v2GetTag(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	a, err := s.tags.Alloc(r.Context(), tag)
	if err != nil {
		return err
	}
	row, err := s.TagRow(r, a)
	if err != nil {
		return err
	}
	if err := s.addOwner(r.Context(), &row); err != nil {
		return err
	}
	if row.Period != "" {
		// The period this server's clock is in, and how many periods
		// have a row: GET /v2/tags/{tag}/periods lists them.
		n, err := s.tags.CountPeriods(r.Context(), tag)
		if err != nil {
			return err
		}
		row.PeriodCount = &n
		if loc, err := tagshape.Location(row.TimeZone); err == nil {
			row.CurrentPeriod = tagshape.PeriodKey(leaf.Period(row.Period), time.Now().In(loc))
		}
	}
	return writeJSON(w, r, http.StatusOK, row)
}

// TagRow is a's row with its tag's shape, read from the store.
func (s *Server) TagRow(r *http.Request, a leaf.Alloc) (TagRow, error) {
	shapes, err := s.tags.TagShapes(r.Context(), []string{a.Tag})
	if err != nil {
		return TagRow{}, err
	}
	return NewTagRow(a, shapes[a.Tag]), nil
}

// createTagRequest is the body of POST /v2/tags. Start and Step are pointers
// so that an absent field takes its default while an explicit 0 is refused:
// an absent start is leaf.Alloc's MaxID 0, "let the store choose". Period,
// TimeZone, Format (a spec of tagshape) and OpaqueBits make the
// tag's shape, fixed from then on.
type createTagRequest struct {
	Tag         string `json:"tag"`
	Start       *int64 `json:"start"`
	Step        *int   `json:"step"`
	Description string `json:"description"`
	Period      string `json:"period"`
	TimeZone    string `json:"time_zone"`
	Format      string `json:"format"`
	OpaqueBits  int    `json:"opaque_bits"`
	// Ordered makes the tag ordered (leaf.OrderedStore); it can be
	// changed later.
	Ordered bool `json:"ordered"`
}

// shapePreparer is implemented by a generator that checks a shape against
// its own settings (segment.Generator: the opaque key) before creating.
type shapePreparer interface {
	PrepareShape(leaf.TagShape) (leaf.TagShape, error)
}

// v2CreateTag serves POST /v2/tags: 201 with the created row.
func (s *Server) v2CreateTag(w http.ResponseWriter, r *http.Request) error {
	if err := s.tagsOn(); err != nil {
		return err
	}
	var req createTagRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	a := leaf.Alloc{Tag: req.Tag, Step: defaultStep, Description: req.Description}
	if req.Start != nil {
		a.MaxID = *req.Start
	}
	if req.Step != nil {
		a.Step = *req.Step
	}
	if err := leaf.ValidateAlloc(a); err != nil {
		return apierr.AsClient(err)
	}
	if req.Start != nil && *req.Start == 0 {
		return apierr.AsClient(fmt.Errorf("%w: start 0, want >= 1, or no start to continue above any IDs of a deleted tag of the same name", leaf.ErrInvalidArgument))
	}
	shape, err := tagshape.ParseShape(req.Tag, req.Period, req.TimeZone, req.Format, req.OpaqueBits)
	if err != nil {
		return apierr.AsClient(err)
	}
	if req.Ordered && s.ord == nil {
		return errNoOrderedStore
	}
	if p, ok := s.seg.(shapePreparer); ok {
		// The generator's own checks of the shape (an opaque tag without
		// a key, a format too narrow for it), written for the client and
		// never holding the key; it also fills the key check.
		if shape, err = p.PrepareShape(shape); err != nil {
			return apierr.AsClient(err)
		}
	}
	if err := s.seg.CreateShapedTag(r.Context(), a, shape); err != nil {
		return err
	}
	if req.Ordered {
		// A second transaction: a request in between is served as for a
		// plain tag, and the first owner continues above it.
		if err := s.setOrdered(r.Context(), a.Tag, true); err != nil {
			return fmt.Errorf("tag %s created, but not made ordered (PATCH it with {\"ordered\":true}): %w", a.Tag, err)
		}
	}
	// Answer with the row as stored (update_time and, without a start,
	// max_id are the store's). If reading it back fails, the tag was still
	// created: say so with what was asked.
	if stored, err := s.tags.Alloc(r.Context(), a.Tag); err == nil {
		a = stored
	}
	row := NewTagRow(a, shape.Canonical())
	row.Ordered = req.Ordered
	w.Header()["Location"] = []string{"/v2/tags/" + a.Tag}
	return writeJSON(w, r, http.StatusCreated, row)
}

// patchTagRequest is the body of PATCH /v2/tags/{tag}: a step, whether
// the tag is ordered, or both. The shape's fields are read only to refuse
// them with words saying why.
type patchTagRequest struct {
	Step       *int            `json:"step"`
	Ordered    *bool           `json:"ordered"`
	Period     json.RawMessage `json:"period"`
	TimeZone   json.RawMessage `json:"time_zone"`
	Format     json.RawMessage `json:"format"`
	OpaqueBits json.RawMessage `json:"opaque_bits"`
}

// v2PatchTag serves PATCH /v2/tags/{tag} {"step":N} or {"ordered":B}, or
// both: 200 with the row.
func (s *Server) v2PatchTag(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	var req patchTagRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	for name, v := range map[string]json.RawMessage{"period": req.Period, "time_zone": req.TimeZone, "format": req.Format, "opaque_bits": req.OpaqueBits} {
		if v != nil {
			return apierr.AsClient(fmt.Errorf("%w: %s cannot be changed: a tag's period, time_zone, format and opaque_bits are fixed when it is created, since IDs issued under them may still be in use", leaf.ErrInvalidArgument, name))
		}
	}
	if req.Step == nil && req.Ordered == nil {
		return apierr.AsClient(fmt.Errorf("%w: step or ordered is required", leaf.ErrInvalidArgument))
	}
	if req.Step != nil {
		if err := leaf.ValidateStep(*req.Step); err != nil {
			return apierr.AsClient(err)
		}
	}
	if req.Ordered != nil && s.ord == nil {
		return errNoOrderedStore
	}
	if req.Step != nil {
		if err := s.seg.SetStep(r.Context(), tag, *req.Step); err != nil {
			return err
		}
	}
	if req.Ordered != nil {
		if err := s.setOrdered(r.Context(), tag, *req.Ordered); err != nil {
			return err
		}
	}
	// If reading the row back fails, answer the error: setting a step is
	// idempotent, so the client may simply retry.
	a, err := s.tags.Alloc(r.Context(), tag)
	if err != nil {
		return err
	}
	row, err := s.TagRow(r, a)
	if err != nil {
		return err
	}
	if err := s.addOwner(r.Context(), &row); err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, row)
}

// v2DeleteTag serves DELETE /v2/tags/{tag}: 204.
func (s *Server) v2DeleteTag(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	if err := s.seg.DeleteTag(r.Context(), tag); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decodeBody reads one JSON object from the request body into dst. Unknown
// fields are refused (a misspelt "stpe" must not silently become the default
// step), as are trailing data and bodies over maxBodyBytes.
//
// The errors are the client's, in the client's terms: encoding/json's
// messages name our Go types ("Go struct field createTagRequest.step of
// type int"), so they are rewritten in JSON's (see bodyError).
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	trailing := false
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err, trailing = terr, true // terr is nil for a well-formed token
		}
	}
	if err == nil && !trailing {
		return nil
	}
	return apierr.AsClient(bodyError(err, trailing))
}

// bodyError describes a request body decodeBody refused, without the
// decoder's own words.
func bodyError(err error, trailing bool) error {
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: at most %d bytes", apierr.ErrBodyTooLarge, maxBodyBytes)
	case trailing:
		return fmt.Errorf("%w: request body: unexpected data after the JSON object", leaf.ErrInvalidArgument)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty body, want a JSON object", leaf.ErrInvalidArgument)
	case errors.As(err, &syntax):
		return fmt.Errorf("%w: request body: invalid JSON at byte %d", leaf.ErrInvalidArgument, syntax.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("%w: request body: got a JSON %s, want an object", leaf.ErrInvalidArgument, jsonValueKind(typ.Value))
	case errors.As(err, &typ):
		return fmt.Errorf("%w: request body: %q: got a JSON %s, want %s", leaf.ErrInvalidArgument,
			truncate(typ.Field, 40), jsonValueKind(typ.Value), jsonKind(typ.Type))
	}
	// An unknown field is the one message left that is the client's own:
	// encoding/json words it `json: unknown field "stpe"`.
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("%w: request body: unknown field %s", leaf.ErrInvalidArgument, truncate(f, 60))
	}
	// A truncated body, a read error: nothing a client needs beyond this.
	return fmt.Errorf("%w: request body: not one complete JSON object", leaf.ErrInvalidArgument)
}

// jsonValueKind is the kind of JSON value in an UnmarshalTypeError's Value
// ("number", "number -1", "string", "bool", "array", "object"): its first
// word, since the rest may be a long number.
func jsonValueKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	return kind
}

// jsonKind names, in JSON's terms, the value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range" // a fraction or a number too large lands here too
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another value"
}

// writeJSON answers with v as JSON and a trailing newline. An encoding
// error is returned before anything is written, to be answered instead.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("httpapi: encode response: %w", err)
	}
	writeBody(w, r, status, appJSON, append(b, '\n'))
	return nil
}
