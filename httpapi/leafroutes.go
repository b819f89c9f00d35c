package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
)

// Buffers for response bodies. The single-ID routes format into a pooled
// fixed array rather than a local one: a slice passed to the ResponseWriter
// interface escapes, so a local array would be a heap allocation per request.
var (
	// smallBufs holds single-ID bodies: at most 19 digits as text, and under
	// 256 bytes as /v2 JSON with a 128-byte tag.
	smallBufs = sync.Pool{New: func() any { return new([256]byte) }}
	// batchBufs holds batch bodies, up to about 45 bytes per ID.
	batchBufs = sync.Pool{New: func() any { return new([]byte) }}
	// idBufs holds the IDs of a batch between the generator and the encoder.
	idBufs = sync.Pool{New: func() any { return new([]int64) }}
)

// leafRequest is a request to a Leaf ID route, as either HTTP stack read it.
type leafRequest struct {
	method string
	key    string // the path after the route's prefix
	query  string // the raw query
	// client is the client's address, for the rate limit; the zero Addr
	// (unknown, or no limit configured) is not limited.
	client netip.Addr
}

// answerLeafID is the one answer of the Leaf ID routes,
// /api/segment/get/{key}[?count=N] and /api/snowflake/get/{key}[?count=N],
// for both HTTP stacks: net/http's leafGet and fasthttp's fastLeafAnswer
// only read the request and write what it returns. From gen (nil: the mode
// is off, answer disabled), the body is the ID in decimal, or N IDs one per
// line, with no trailing newline (a client reading one ID gets exactly
// Leaf's body; a batch splits cleanly on "\n"), appended to buf. HEAD
// answers the status and headers GET would, without issuing (see headID):
// no body. err is what to answer instead, in the text style; one that
// refuses the method is answered with Allow: allowLeaf (leafAllow).
func (s *Server) answerLeafID(ctx context.Context, req leafRequest, gen idSource, disabled error, buf []byte) ([]byte, error) {
	switch req.method {
	case http.MethodGet, http.MethodPost, http.MethodHead:
	default:
		return nil, methodError(req.method, allowLeaf[0])
	}
	if gen == nil {
		return nil, disabled
	}
	if err := validTag(req.key); err != nil {
		return nil, err
	}
	n := 0 // no count: one ID, answered without the batch's pooled slice
	if req.query != "" {
		if c, ok := queryValue(req.query, "count"); ok {
			var err error
			if n, err = parseCount(c); err != nil {
				return nil, err
			}
		}
	}
	// Limited once the request is known to be valid: a bad one costs the
	// client nothing and gets its 400.
	if s.limiter != nil && req.client.IsValid() {
		if err := s.allow(req.client); err != nil {
			return nil, err
		}
	}
	if req.method == http.MethodHead {
		return nil, s.headKnown(ctx, disabled, req.key)
	}
	if n > 0 {
		p := idBufs.Get().(*[]int64)
		ids, err := gen.NextIDs(ctx, req.key, n, (*p)[:0])
		if err == nil {
			err = validateIDs(ids, n)
		}
		if err != nil {
			idBufs.Put(p)
			return nil, err
		}
		buf = appendIDLines(buf, ids)
		putIDs(p, ids)
		return buf, nil
	}
	id, err := gen.NextID(ctx, req.key)
	if err == nil {
		err = validateID(id)
	}
	if err != nil {
		return nil, err
	}
	return strconv.AppendInt(buf, id, 10), nil
}

// leafAllow says an error of answerLeafID refuses the request's method: its
// answer carries Allow: allowLeaf.
func leafAllow(err error) bool { return errors.Is(err, apierr.ErrMethodNotAllowed) }

// leafGet is answerLeafID on net/http. It returns the status answered, for
// metrics.
func (s *Server) leafGet(w http.ResponseWriter, r *http.Request, gen idSource, disabled error, key string) (status int) {
	req := leafRequest{method: r.Method, key: key, query: r.URL.RawQuery}
	if s.limiter != nil {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			req.client = ap.Addr()
		}
	}
	bp := batchBufs.Get().(*[]byte)
	defer batchBufs.Put(bp)
	body, err := s.answerLeafID(r.Context(), req, gen, disabled, (*bp)[:0])
	switch {
	case err != nil:
		if leafAllow(err) {
			w.Header()["Allow"] = allowLeaf
		}
		return s.writeError(w, r, textStyle, err)
	case r.Method == http.MethodHead:
		return s.headID(w, r, textStyle, textPlain, nil)
	}
	writeBody(w, r, http.StatusOK, textPlain, body)
	*bp = body
	return http.StatusOK
}

// headID answers HEAD on an ID route once the request has been validated:
// known is nil when GET would be served (200), else the error GET would meet.
//
// HEAD must not issue. It is a safe method (RFC 9110 §9.2.1): monitors,
// proxies and link checkers send it freely, and an ID taken and thrown away
// for each is a gap in a segment's sequence and a worker's sequence spent
// for nothing. Without an ID the body's length is unknown, so the answer has
// no Content-Length, a header RFC 9110 §9.3.2 lets a HEAD answer leave out;
// the other headers are GET's.
func (s *Server) headID(w http.ResponseWriter, r *http.Request, style errorStyle, contentType []string, known error) int {
	if known != nil {
		return s.writeError(w, r, style, known)
	}
	w.Header()["Content-Type"] = contentType
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}

// headKnown is nil when GET would serve an ID for key on the Leaf ID route
// whose disabled error is given (the two routes share leafGet and differ in
// it), else the error GET would answer. The snowflake generator ignores the
// key: every valid key is served.
func (s *Server) headKnown(ctx context.Context, disabled error, key string) error {
	if disabled != apierr.ErrSegmentDisabled {
		return nil
	}
	return s.segmentTagKnown(ctx, key)
}

// headLookupTimeout bounds the store lookup of a HEAD for a tag this server
// does not hold in memory, as segment.wait_timeout bounds a GET's wait.
const headLookupTimeout = 2 * time.Second

// segmentTagKnown tells, without issuing, whether the segment generator
// would serve tag (SegmentGenerator.Known). A store that cannot answer is
// not ready (503), as it is for a GET of a tag not yet loaded.
func (s *Server) segmentTagKnown(ctx context.Context, tag string) error {
	ctx, cancel := context.WithTimeout(ctx, headLookupTimeout)
	defer cancel()
	err := s.seg.Known(ctx, tag)
	if err != nil && apierr.Classify(err).Code == apierr.Internal.Code {
		return fmt.Errorf("%w: look up tag %s: %w", leaf.ErrNotReady, tag, err)
	}
	return err
}

// appendIDLines appends ids to b in decimal, one per line, with no newline
// after the last: Leaf's batch body.
func appendIDLines(b []byte, ids []int64) []byte {
	for i, id := range ids {
		if i > 0 {
			b = append(b, '\n')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return b
}

// nextIDs gets n IDs from gen into a pooled slice and checks them. Once done
// with ids, the caller returns them with putIDs(p, ids).
func nextIDs(r *http.Request, gen idSource, key string, n int) (p *[]int64, ids []int64, err error) {
	p = idBufs.Get().(*[]int64)
	ids, err = gen.NextIDs(r.Context(), key, n, (*p)[:0])
	if err == nil {
		err = validateIDs(ids, n)
	}
	if err != nil {
		idBufs.Put(p)
		return nil, nil, err
	}
	return p, ids, nil
}

// putIDs returns a batch's slice, possibly grown by the generator, to the pool.
func putIDs(p *[]int64, ids []int64) {
	*p = ids[:0]
	idBufs.Put(p)
}

// checkID and checkIDs refuse a generator's answer that breaks its
// contract: a bug must become a 500, never IDs with a 200.
func validateID(id int64) error { return brokenGenerator(leaf.ValidateID(id)) }

func validateIDs(ids []int64, n int) error { return brokenGenerator(leaf.ValidateIDs(ids, n)) }

func brokenGenerator(err error) error {
	if err != nil {
		return fmt.Errorf("httpapi: the generator answered without an error: %w", err)
	}
	return nil
}

// queryValue returns the first value of name in a raw query string. Unlike
// url.Values it builds no map, so the ID route stays allocation-free when a
// client adds a cache-buster such as ?_=1700000000. A value that fails to
// unescape is returned raw, for the caller's validation to reject.
func queryValue(rawQuery, name string) (value string, ok bool) {
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(pair, "=")
		if k != name {
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			if uk, err := url.QueryUnescape(k); err != nil || uk != name {
				continue
			}
		}
		if strings.ContainsAny(v, "%+") {
			if uv, err := url.QueryUnescape(v); err == nil {
				v = uv
			}
		}
		return v, true
	}
	return "", false
}

// leafDecodeResponse is Leaf's /decodeSnowflakeId body. Every value is a
// string, as Leaf's Map<String,String>, and the fields are in the order Leaf's
// HashMap writes them.
type leafDecodeResponse struct {
	WorkerID   string `json:"workerId"`
	SequenceID string `json:"sequenceId"`
	Timestamp  string `json:"timestamp"`
}

// leafDecode serves /decodeSnowflakeId?snowflakeId=N. Errors, bad input
// included, answer {"errorMsg":"..."} with their status (400 for bad input),
// where Leaf answers 200: see the package doc.
func (s *Server) leafDecode(w http.ResponseWriter, r *http.Request) {
	v, ok := queryValue(r.URL.RawQuery, "snowflakeId")
	parts, err := s.decode("snowflakeId", v, ok)
	if err != nil {
		s.writeError(w, r, leafJSONStyle, err)
		return
	}
	if err := writeJSON(w, r, http.StatusOK, leafDecodeResponse{
		WorkerID:   strconv.FormatInt(parts.WorkerID, 10),
		SequenceID: strconv.FormatInt(parts.Sequence, 10),
		Timestamp:  leafTimestamp(parts.Timestamp, time.Local),
	}); err != nil {
		s.writeError(w, r, leafJSONStyle, err)
	}
}

// leafTimestamp formats Unix milliseconds as Leaf does: the number, then the
// time in loc as SimpleDateFormat's "yyyy-MM-dd HH:mm:ss.SSS" in brackets.
func leafTimestamp(ms int64, loc *time.Location) string {
	b := strconv.AppendInt(make([]byte, 0, 40), ms, 10)
	b = append(b, '(')
	b = time.UnixMilli(ms).In(loc).AppendFormat(b, "2006-01-02 15:04:05.000")
	return string(append(b, ')'))
}

// decode parses v, the client's parameter name (given: whether the client
// sent it at all), and takes it apart with the snowflake generator's layout.
// Parsing is strict decimal, as Leaf's Long.parseLong; whether the number is
// an ID the layout can produce is the generator's call.
func (s *Server) decode(name, v string, given bool) (leaf.SnowflakeParts, error) {
	if s.snow == nil {
		return leaf.SnowflakeParts{}, apierr.ErrSnowflakeDisabled
	}
	if !given {
		return leaf.SnowflakeParts{}, apierr.AsClient(fmt.Errorf("%w: the parameter %s is required", leaf.ErrInvalidArgument, name))
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		why := "is not a decimal integer"
		if errors.Is(err, strconv.ErrRange) {
			why = "is out of range for a 64-bit ID"
		}
		return leaf.SnowflakeParts{}, apierr.AsClient(fmt.Errorf("%w: %s %q %s", leaf.ErrInvalidArgument, name, truncate(v, 40), why))
	}
	return decodeID(s.snow, id)
}

// cachePage serves /cache: a page (see parsePage) of the tags' buffers,
// with Leaf's columns, and a link to the next page.
func (s *Server) cachePage(w http.ResponseWriter, r *http.Request) {
	if s.seg == nil {
		s.writeError(w, r, textStyle, apierr.ErrSegmentDisabled)
		return
	}
	q, err := parsePage(r)
	if err != nil {
		s.writeError(w, r, textStyle, err)
		return
	}
	page, next := statusPage(s.seg.Status(), q)
	s.writePage(w, r, cacheTemplate, htmlPage{Rows: page, Prefix: q.prefix, Next: nextLink(q, next), Databases: s.databases(true)})
}

// dbPage serves /db: a page (see parsePage) of the rows of leaf_alloc, with
// Leaf's columns, and a link to the next page.
func (s *Server) dbPage(w http.ResponseWriter, r *http.Request) {
	if err := s.tagsOn(); err != nil {
		s.writeError(w, r, textStyle, err)
		return
	}
	q, err := parsePage(r)
	if err != nil {
		s.writeError(w, r, textStyle, err)
		return
	}
	page, next, err := s.allocsPage(r, q)
	if err != nil {
		s.writeError(w, r, textStyle, err)
		return
	}
	s.writePage(w, r, dbTemplate, htmlPage{Rows: page, Prefix: q.prefix, Next: nextLink(q, next), Databases: s.databases(true)})
}

// htmlPage is what the /cache and /db templates render: the rows, the
// prefix they were filtered by, the next page's link, "" on the last, and
// the databases of a store spread over several, nil for one.
type htmlPage struct {
	Rows      any
	Prefix    string
	Next      string
	Databases []DatabaseStatus
}

// nextLink is the relative URL of the page after the one whose last tag is
// next, or "" when there is none.
func nextLink(q pageQuery, next string) string {
	if next == "" {
		return ""
	}
	return q.nextURL(next)
}

// writePage renders a page in full before writing, so that a template error
// becomes a 500 rather than half a page with 200.
func (s *Server) writePage(w http.ResponseWriter, r *http.Request, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		s.writeError(w, r, textStyle, fmt.Errorf("httpapi: render %s: %w", t.Name(), err))
		return
	}
	writeBody(w, r, http.StatusOK, textHTML, buf.Bytes())
}

// The monitor pages are self-contained (no CDN, unlike Leaf's bootstrap), so
// they work on a host without Internet access.
const pageHead = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>leaf: {{block "title" .}}{{end}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
td.l,th.l{text-align:left}
nav a{margin-right:1em}
</style></head><body>
<nav><a href="/cache">cache</a><a href="/db">db</a><a href="/v2/status">status</a></nav>
`

// pageTail ends a listing: the link to its next page, if there is one,
// then, below Leaf's table so that what reads Leaf's page still finds it
// first and unchanged, the databases of a store spread over several.
const pageTail = `{{with .Next}}<p><a href="{{.}}" rel="next">next page</a></p>{{end}}
{{- with .Databases}}
<h2>Databases</h2>
<table class="databases">
<thead><tr><th>db</th><th class="l">name</th><th class="l">health</th><th>reserves</th><th>failures</th><th>highest</th><th class="l">last error</th></tr></thead>
<tbody>
{{- range .}}
<tr><td>{{.Index}}</td><td class="l">{{.Name}}</td><td class="l">{{if not .Verified}}UNVERIFIED{{else if .Healthy}}up{{else}}DOWN{{end}}</td><td>{{.Reserves}}</td><td>{{.Failures}}</td><td>{{.HighestID}}</td><td class="l">{{.LastError}}</td></tr>
{{- end}}
</tbody></table>
{{- end}}
</body></html>
`

var cacheTemplate = template.Must(template.New("cache").Parse(pageHead +
	`{{define "title"}}segment cache{{end}}<h1>Segment cache</h1>
{{with .Prefix}}<p>Tags beginning with <code>{{.}}</code></p>{{end}}
<table>
<thead><tr><th class="l">name</th><th>init</th><th>next</th><th>pos</th><th>value0</th><th>max0</th><th>step0</th><th>value1</th><th>max1</th><th>step1</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr><td class="l">{{.Tag}}{{with .Period}} ({{.}}){{end}}{{if .Ordered}} (ordered, owner {{with .Owner}}{{.}}{{else}}none{{end}}){{end}}</td><td>{{.InitOK}}</td><td>{{.NextReady}}</td><td>{{.Pos}}</td>
{{- with index .Buffers 0}}<td>{{.Value}}</td><td>{{.Max}}</td><td>{{.Step}}</td>{{end}}
{{- with index .Buffers 1}}<td>{{.Value}}</td><td>{{.Max}}</td><td>{{.Step}}</td>{{end}}</tr>
{{- else}}
<tr><td class="l" colspan="10">no tags</td></tr>
{{- end}}
</tbody></table>
` + pageTail))

var dbTemplate = template.Must(template.New("db").Funcs(template.FuncMap{
	"datetime": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Format("2006-01-02 15:04:05 MST")
	},
}).Parse(pageHead +
	`{{define "title"}}leaf_alloc{{end}}<h1>leaf_alloc</h1>
{{with .Prefix}}<p>Tags beginning with <code>{{.}}</code></p>{{end}}
<table>
<thead><tr><th class="l">tag</th><th>max</th><th>step</th><th class="l">update</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr><td class="l">{{.Tag}}</td><td>{{.MaxID}}</td><td>{{.Step}}</td><td class="l">{{datetime .UpdateTime}}</td></tr>
{{- else}}
<tr><td class="l" colspan="4">no rows</td></tr>
{{- end}}
</tbody></table>
` + pageTail))
