package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/topn"
)

// Bounds of /v2/status/summary, which the monitor page polls every second:
// its size depends on none of the table's, the tags held or the reasons.
const (
	defaultTopTags = 20
	maxTopTags     = 50
	// maxDegradedTags caps the degraded tags shown with their buffers.
	maxDegradedTags = 50
	// maxReasons caps the degraded reasons of /v2/status and its summary;
	// degraded_count says how many there are.
	maxReasons = 100
)

// summaryResponse is the body of /v2/status/summary: the version, the
// degraded reasons, then, with detail, aggregates over every tag held, the
// busiest tags and the degraded ones, and the worker.
type summaryResponse struct {
	Version string `json:"version"`
	Detail  bool   `json:"detail"`
	// Degraded is every enabled generator's reasons, segment first, as
	// /readyz lists them (with their causes given the detail): at most
	// maxReasons of them; DegradedCount counts them all.
	Degraded      []string       `json:"degraded"`
	DegradedCount int            `json:"degraded_count"`
	Segment       segmentSummary `json:"segment"`
	Snowflake     *workerStatus  `json:"snowflake,omitempty"`
}

type segmentSummary struct {
	Enabled bool `json:"enabled"`
	// StoreOK is false while the generator reports the store unreachable.
	StoreOK bool `json:"store_ok"`
	// Databases is, with the detail, every database of a store spread
	// over several (at most leaf.MaxStripes); absent for one database.
	Databases []DatabaseStatus `json:"databases,omitempty"`
	// The rest is shown with detail only.
	*tagSummary
}

type tagSummary struct {
	// TagsKnown is the tags this server holds; TagsInUse those asked for
	// an ID since it started (a range loaded, loading or failed).
	TagsKnown int     `json:"tags_known"`
	TagsInUse int     `json:"tags_in_use"`
	IDsPerSec float64 `json:"ids_per_sec"`
	Issued    uint64  `json:"issued"`
	// Top is the busiest tags in use, by IDs/s, then IDs issued, then name.
	Top []tagStatus `json:"top"`
	// DegradedTags is at most maxDegradedTags of the tags the degraded
	// reasons name, in their order, with their buffers; DegradedTagsCount
	// counts them all.
	DegradedTags      []degradedTag `json:"degraded_tags"`
	DegradedTagsCount int           `json:"degraded_tags_count"`
}

type degradedTag struct {
	tagStatus
	Reason string `json:"reason"`
}

// statusDetail says whether a /v2/status request gets the detail: with an
// admin token configured, only with the token (a wrong one is refused,
// rather than silently given less, so that a misconfigured client finds
// out); and never when it asks for ?detail=0.
func (s *Server) statusDetail(r *http.Request) (bool, error) {
	detail := true
	if s.hasToken {
		if r.Header.Get("Authorization") == "" {
			detail = false
		} else if err := s.checkAdmin(r); err != nil {
			return false, err
		}
	}
	// ?detail=1 cannot widen it.
	if v, ok := queryValue(r.URL.RawQuery, "detail"); ok {
		d, err := strconv.ParseBool(v)
		if err != nil {
			return false, apierr.AsClient(fmt.Errorf("%w: detail %q, want 0 or 1", leaf.ErrInvalidArgument, truncate(v, 20)))
		}
		detail = detail && d
	}
	return detail, nil
}

// reasons is the generator's degraded reasons as /v2/status shows them: in
// the clients' words without detail, at most maxReasons, and how many
// there are.
func reasons(all []string, detail bool) ([]string, int) {
	n := len(all)
	shown := all[:min(n, maxReasons)]
	if !detail {
		shown = clientReasons(shown)
	}
	if shown == nil {
		shown = []string{}
	}
	return shown, n
}

// v2StatusSummary serves /v2/status/summary: a bounded view of the
// server, for the monitor page to poll. Who gets the detail is decided as
// for /v2/status.
func (s *Server) v2StatusSummary(w http.ResponseWriter, r *http.Request) error {
	detail, err := s.statusDetail(r)
	if err != nil {
		return err
	}
	top := defaultTopTags
	if v, ok := queryValue(r.URL.RawQuery, "top"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxTopTags {
			return apierr.AsClient(fmt.Errorf("%w: top %q, want 0..%d", leaf.ErrInvalidArgument, truncate(v, 20), maxTopTags))
		}
		top = n
	}
	resp := summaryResponse{Version: s.version, Detail: detail}
	var segReasons, snowReasons []string
	if s.seg != nil {
		segReasons = s.seg.Degraded()
		resp.Segment.Enabled = true
		resp.Segment.StoreOK = !slices.ContainsFunc(segReasons, isStoreReason)
		if detail {
			resp.Segment.tagSummary = s.summarize(segReasons, top)
			for i := range resp.Segment.Top {
				s.addFormats(r.Context(), &resp.Segment.Top[i])
			}
			for i := range resp.Segment.DegradedTags {
				// A tag dropped since its reason was written has no
				// status, and its shape is not worth a store read.
				if d := &resp.Segment.DegradedTags[i]; d.InitOK || d.Issued > 0 || d.LoadErrors > 0 {
					s.addFormats(r.Context(), &d.tagStatus)
				}
			}
			resp.Segment.Databases = s.databases(detail)
		}
	}
	if s.snow != nil {
		snowReasons = s.snow.Degraded()
	}
	resp.Degraded, resp.DegradedCount = reasons(slices.Concat(segReasons, snowReasons), detail)
	if s.snow != nil && detail {
		resp.Snowflake = newWorkerStatus(s.snow.Status())
	}
	return writeJSON(w, r, http.StatusOK, resp)
}

// isStoreReason tells a degraded reason about the store, which the segment
// generator words "segment store unreachable since ...".
func isStoreReason(reason string) bool {
	return strings.HasPrefix(reason, "segment store ")
}

// summarize reads the generator's totals, and the statuses of the top
// busiest tags and of at most maxDegradedTags of those the reasons name:
// its cost follows top and the reasons, not the tags in use.
func (s *Server) summarize(reasons []string, top int) *tagSummary {
	tot := s.seg.Totals()
	sum := &tagSummary{
		TagsKnown: tot.Known, TagsInUse: tot.Active, IDsPerSec: tot.Rate, Issued: tot.Issued,
		Top: []tagStatus{}, DegradedTags: []degradedTag{},
	}
	var named []string // the tags the reasons name, the first maxDegradedTags
	for _, reason := range reasons {
		if tag, ok := reasonTag(reason); ok {
			sum.DegradedTagsCount++
			if len(named) < maxDegradedTags {
				named = append(named, tag)
			}
		}
	}
	st := s.seg.Busiest(top, named...) // sorted by tag
	// The top busiest of st are the top busiest of all: st holds them.
	busiest := topn.New(top, func(a, b int) bool { return leaf.Busier(&st[a], &st[b]) })
	for i := range st {
		if inUse(st[i]) {
			busiest.Offer(i)
		}
	}
	for _, i := range busiest.Best() {
		sum.Top = append(sum.Top, newTagStatus(&st[i]))
	}
	for _, reason := range reasons {
		tag, ok := reasonTag(reason)
		if !ok || len(sum.DegradedTags) == maxDegradedTags {
			continue
		}
		d := degradedTag{Reason: reason}
		if i, found := slices.BinarySearchFunc(st, tag, func(s leaf.SegmentStatus, tag string) int {
			return strings.Compare(s.Tag, tag)
		}); found {
			d.tagStatus = newTagStatus(&st[i])
		} else {
			d.Tag = tag // dropped since the reason was written
		}
		sum.DegradedTags = append(sum.DegradedTags, d)
	}
	return sum
}

// inUse says a tag was asked for an ID since the server started: a range
// loaded, loading or failed. A tag whose state was made a moment ago is
// not among the busiest yet.
func inUse(t leaf.SegmentStatus) bool {
	return t.InitOK || t.Loading || t.Issued > 0 || t.LoadErrors > 0
}

// reasonTag is the tag a degraded reason is about: the generator words a
// tag's reasons "tag NAME: ...", and a name has no spaces.
func reasonTag(reason string) (string, bool) {
	rest, ok := strings.CutPrefix(reason, "tag ")
	if !ok {
		return "", false
	}
	tag, _, ok := strings.Cut(rest, ": ")
	return tag, ok && leaf.ValidateTag(tag) == nil
}
