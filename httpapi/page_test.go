package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// listing reads one page of a listing route: the tags on it, in order, and
// the target of the next page, "" on the last.
type listing struct {
	name  string
	read  func(t *testing.T, base, target string) (tags []string, next string)
	first func(prefix string, limit int) string
}

// jsonListing is a /v2 listing whose tags and next cursor are at path in
// the body: "tags" or "segment.tags".
func jsonListing(route, path string) listing {
	return listing{
		name: route,
		first: func(prefix string, limit int) string {
			return fmt.Sprintf("%s?prefix=%s&limit=%d", route, url.QueryEscape(prefix), limit)
		},
		read: func(t *testing.T, base, target string) ([]string, string) {
			t.Helper()
			r := do(t, "GET", base, target, "")
			if r.status != 200 {
				t.Fatalf("GET %s: %d %s", target, r.status, r.body)
			}
			var body struct {
				Tags []struct {
					Tag string `json:"tag"`
				} `json:"tags"`
				Next    *string `json:"next"`
				Segment struct {
					Tags []struct {
						Tag string `json:"tag"`
					} `json:"tags"`
					Next *string `json:"next"`
				} `json:"segment"`
			}
			if err := json.Unmarshal([]byte(r.body), &body); err != nil {
				t.Fatalf("GET %s: %v", target, err)
			}
			rows, next := body.Tags, body.Next
			if path == "segment.tags" {
				rows, next = body.Segment.Tags, body.Segment.Next
			}
			tags := make([]string, len(rows))
			for i, row := range rows {
				tags[i] = row.Tag
			}
			if next == nil {
				return tags, ""
			}
			if *next == "" || len(tags) == 0 || *next != tags[len(tags)-1] {
				t.Fatalf("GET %s: next %q, want the page's last tag", target, *next)
			}
			q, _ := url.ParseQuery(strings.SplitN(target, "?", 2)[1])
			q.Set("after", *next)
			return tags, route + "?" + q.Encode()
		},
	}
}

var (
	htmlRow  = regexp.MustCompile(`<tr><td class="l">([^<]+)</td>`)
	htmlNext = regexp.MustCompile(`<a href="([^"]*)" rel="next">next page</a>`)
)

// htmlListing is /db or /cache: the tag is each row's first cell, and the
// next page is a link.
func htmlListing(route string) listing {
	return listing{
		name: route,
		first: func(prefix string, limit int) string {
			return fmt.Sprintf("%s?prefix=%s&limit=%d", route, url.QueryEscape(prefix), limit)
		},
		read: func(t *testing.T, base, target string) ([]string, string) {
			t.Helper()
			r := do(t, "GET", base, target, "")
			if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Fatalf("GET %s: %d %s", target, r.status, r.body)
			}
			var tags []string
			for _, m := range htmlRow.FindAllStringSubmatch(r.body, -1) {
				tags = append(tags, html.UnescapeString(m[1]))
			}
			m := htmlNext.FindStringSubmatch(r.body)
			if m == nil {
				return tags, ""
			}
			return tags, route + html.UnescapeString(m[1])
		},
	}
}

var listings = []listing{
	jsonListing("/v2/tags", "tags"),
	jsonListing("/v2/status", "segment.tags"),
	htmlListing("/db"),
	htmlListing("/cache"),
}

// realServer serves a real generator on a SQLite store holding tags,
// each asked for an ID so that the generator holds it with its buffers.
func realServer(t *testing.T, tags ...string) (base string, st *sqlite.Store) {
	t.Helper()
	st = testutil.Store(t)
	for _, tag := range tags {
		if err := st.CreateTag(t.Context(), leaf.Alloc{Tag: tag, MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
	}
	set := segment.DefaultConfig()
	set.Store, set.Logger = st, slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := segment.New(t.Context(), set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	for _, tag := range tags {
		if _, err := g.NextID(t.Context(), tag); err != nil {
			t.Fatal(err)
		}
	}
	base, _ = testServerConfig(t, Config{Segment: g, Tags: st})
	return base, st
}

// TestListingPagesChurn walks every listing a few tags at a time while tags
// are created and deleted through the API between the pages, before and
// after the cursor, the cursor's own tag included: every tag that exists
// throughout is listed exactly once, none twice, in order.
func TestListingPagesChurn(t *testing.T) {
	var stableTags []string
	stable := map[string]bool{}
	for i := range 30 {
		tag := fmt.Sprintf("s%03d", i*10)
		stableTags = append(stableTags, tag)
		stable[tag] = true
	}
	for _, l := range listings {
		t.Run(strings.TrimPrefix(l.name, "/"), func(t *testing.T) {
			t.Parallel()
			base, _ := realServer(t, append([]string{"other1", "other2"}, stableTags...)...)
			existed := map[string]bool{}
			var alive []string
			create := func(tag string) {
				if r := do(t, "POST", base, "/v2/tags", `{"tag":"`+tag+`","step":10}`); r.status != 201 {
					t.Fatalf("create %s: %d %s", tag, r.status, r.body)
				}
				// An ID, so that the generator holds the tag for /cache
				// and /v2/status.
				if r := do(t, "GET", base, "/api/segment/get/"+tag, ""); r.status != 200 {
					t.Fatalf("ID of %s: %d %s", tag, r.status, r.body)
				}
				existed[tag] = true
				alive = append(alive, tag)
			}
			remove := func(tag string) {
				if r := do(t, "DELETE", base, "/v2/tags/"+tag, ""); r.status != 204 {
					t.Fatalf("delete %s: %d %s", tag, r.status, r.body)
				}
				alive = slices.DeleteFunc(alive, func(a string) bool { return a == tag })
			}
			for i := range 4 {
				create(fmt.Sprintf("s%03d", 200+i*10+5)) // ahead, to delete
			}
			var got []string
			target := l.first("s", 3)
			pages := 0
			for target != "" {
				if pages++; pages > 200 {
					t.Fatal("no last page after 200")
				}
				var page []string
				page, target = l.read(t, base, target)
				if len(page) > 3 {
					t.Fatalf("page of %d tags, limit 3", len(page))
				}
				got = append(got, page...)
				if target == "" {
					break
				}
				cursor := page[len(page)-1]
				if !stable[cursor] {
					remove(cursor)
				}
				create(cursor + "a")
				create(fmt.Sprintf("r%03d", pages))
				create(fmt.Sprintf("t%03d", pages))
				if len(alive) > 4 {
					remove(alive[0])
					remove(alive[len(alive)-1])
				}
			}
			seen := map[string]int{}
			for i, tag := range got {
				if seen[tag]++; seen[tag] > 1 {
					t.Errorf("%s listed twice", tag)
				}
				if !stable[tag] && !existed[tag] || !strings.HasPrefix(tag, "s") {
					t.Errorf("%s listed, not a tag under s that existed", tag)
				}
				if i > 0 && got[i-1] >= tag {
					t.Errorf("%s after %s", tag, got[i-1])
				}
			}
			for tag := range stable {
				if seen[tag] != 1 {
					t.Errorf("%s listed %d times, want once", tag, seen[tag])
				}
			}
			if pages < 10 {
				t.Errorf("%d pages: the walk did not churn", pages)
			}
		})
	}
}

// TestListingPages checks the pages' bounds, prefixes and cursors, and
// refuses bad parameters on every listing.
func TestListingPages(t *testing.T) {
	tags := []string{"a.1", "a:2", "a_3", "ab", "b", "b-1", "c"}
	base, _ := realServer(t, tags...)
	for _, l := range listings {
		t.Run(strings.TrimPrefix(l.name, "/"), func(t *testing.T) {
			for _, c := range []struct {
				target string
				want   []string
				next   bool
			}{
				{l.name, tags, false},
				{l.name + "?limit=7", tags, false},
				{l.name + "?limit=6", tags[:6], true},
				{l.name + "?limit=1&after=a_3", []string{"ab"}, true},
				{l.name + "?prefix=a", []string{"a.1", "a:2", "a_3", "ab"}, false},
				{l.name + "?prefix=a_", []string{"a_3"}, false},
				{l.name + "?prefix=a&after=a_3", []string{"ab"}, false},
				{l.name + "?prefix=a&after=a%3A2&limit=1", []string{"a_3"}, true},
				{l.name + "?prefix=b-", []string{"b-1"}, false},
				{l.name + "?prefix=z", nil, false},
				{l.name + "?after=c", nil, false},
				{l.name + "?after=bb", []string{"c"}, false},
				{l.name + "?limit=1000&prefix=", tags, false},
			} {
				got, next := l.read(t, base, c.target)
				if !slices.Equal(got, c.want) || (next != "") != c.next {
					t.Errorf("%s: %q next %q, want %q, a next page %v", c.target, got, next, c.want, c.next)
				}
			}
			for _, q := range []string{
				"limit=0", "limit=-1", "limit=1001", "limit=abc", "limit=",
				"prefix=a%20b", "prefix=%3Cx%3E", "prefix=" + strings.Repeat("a", leaf.MaxTagLen+1),
				"after=a%20b", "after=" + strings.Repeat("a", leaf.MaxTagLen+1),
			} {
				if r := do(t, "GET", base, l.name+"?"+q, ""); r.status != http.StatusBadRequest {
					t.Errorf("%s?%s: %d %s, want 400", l.name, q, r.status, r.body)
				}
			}
		})
	}
}

// TestListingPagesBounded: with 100,000 tags, every listing's default page,
// and the summary the monitor page polls, stays under a megabyte.
func TestListingPagesBounded(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("100,000 tags: a size check the race detector only slows")
	}
	st := testutil.Store(t)
	rows := make([]leaf.Alloc, 100_000)
	for i := range rows {
		rows[i] = leaf.Alloc{Tag: fmt.Sprintf("tenant-%06d.orders", i), MaxID: 1, Step: 1000}
	}
	// One transaction: 100,000 CreateTag calls would each sync a commit.
	testutil.InsertForeign(t, st, rows...)
	set := segment.DefaultConfig()
	set.Store, set.Logger = st, slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := segment.New(t.Context(), set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	for i := range 2000 { // 2% in use, with buffers to show
		if _, err := g.NextID(t.Context(), fmt.Sprintf("tenant-%06d.orders", i*50)); err != nil {
			t.Fatal(err)
		}
	}
	base, _ := testServerConfig(t, Config{Segment: g, Tags: st})
	for _, target := range []string{"/v2/tags", "/v2/status", "/v2/status?detail=1", "/db", "/cache", "/v2/status/summary?top=50"} {
		r := do(t, "GET", base, target, "")
		if r.status != 200 || len(r.body) > 1<<20 {
			t.Errorf("GET %s: %d, %d bytes, want 200 and at most 1 MiB", target, r.status, len(r.body))
		}
		if !strings.Contains(target, "summary") && !strings.Contains(r.body, "next") {
			t.Errorf("GET %s: no next page", target)
		}
		t.Logf("GET %s: %d bytes", target, len(r.body))
	}
}

// summaryGen is a generator whose tags in use, names known and reasons the
// test sets. It counts the calls of Status, which the summary must not make:
// its cost follows what it shows, not the tags in use.
type summaryGen struct {
	*fakeGen
	st          []leaf.SegmentStatus
	known       int
	reasons     []string
	statusCalls *atomic.Int64
}

func (g summaryGen) Status() []leaf.SegmentStatus { g.statusCalls.Add(1); return g.st }
func (g summaryGen) Degraded() []string           { return g.reasons }
func (g summaryGen) Totals() leaf.SegmentTotals   { return totalsOf(g.st, g.known) }
func (g summaryGen) Busiest(n int, also ...string) []leaf.SegmentStatus {
	return busiestOf(g.st, n, also)
}

// TestStatusSummary checks /v2/status/summary: aggregates over every tag,
// the busiest tags in order, the degraded ones with their buffers, all
// bounded; the summary without the token; bad parameters.
func TestStatusSummary(t *testing.T) {
	g := summaryGen{fakeGen: newFakeGen(), known: 300, statusCalls: new(atomic.Int64)}
	var ids float64
	for i := range 300 {
		s := leaf.SegmentStatus{Tag: fmt.Sprintf("t%03d", i)}
		switch {
		case i%3 == 0: // never asked for: known, not in use
			continue
		case i%3 == 1:
			s.InitOK, s.Issued, s.Rate = true, uint64(i), float64(i%50)
		default:
			s.InitOK, s.Issued = true, uint64(1000+i)
		}
		ids += s.Rate
		g.st = append(g.st, s)
	}
	g.reasons = []string{"segment store unreachable since 2024-05-01T12:00:00Z: dial tcp 10.0.0.1:3306: refused"}
	for i := range 60 {
		g.reasons = append(g.reasons, fmt.Sprintf("tag t%03d: no IDs buffered: mysql: reserve: refused", i*5))
	}
	g.reasons = append(g.reasons, "tag gone: no IDs buffered: x")
	for i := range 50 {
		g.reasons = append(g.reasons, fmt.Sprintf("tag u%03d: buffered IDs last 0.5s", i))
	}
	snow := newFakeSnowflake()
	snow.setDegraded("snowflake heartbeat failing: zk: refused")
	base, _ := testServerConfig(t, Config{Segment: g, Snowflake: snow})

	type tag struct {
		Tag     string  `json:"tag"`
		Rate    float64 `json:"ids_per_sec"`
		Issued  uint64  `json:"issued"`
		Buffers []struct {
			Max int64 `json:"max"`
		} `json:"buffers"`
		Reason string `json:"reason"`
	}
	var sum struct {
		Version       string   `json:"version"`
		Detail        bool     `json:"detail"`
		Degraded      []string `json:"degraded"`
		DegradedCount int      `json:"degraded_count"`
		Segment       struct {
			Enabled           bool    `json:"enabled"`
			StoreOK           *bool   `json:"store_ok"`
			TagsKnown         *int    `json:"tags_known"`
			TagsInUse         int     `json:"tags_in_use"`
			IDsPerSec         float64 `json:"ids_per_sec"`
			Top               []tag   `json:"top"`
			DegradedTags      []tag   `json:"degraded_tags"`
			DegradedTagsCount int     `json:"degraded_tags_count"`
		} `json:"segment"`
		Snowflake *struct {
			WorkerID int64 `json:"worker_id"`
		} `json:"snowflake"`
	}
	get := func(target string, header http.Header) {
		t.Helper()
		r := doHeader(t, "GET", base, target, "", header)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", target, r.status, r.body)
		}
		sum.Segment.Top, sum.Segment.DegradedTags, sum.Segment.TagsKnown, sum.Snowflake = nil, nil, nil, nil
		if err := json.Unmarshal([]byte(r.body), &sum); err != nil {
			t.Fatal(err)
		}
	}
	get("/v2/status/summary", nil)
	s := sum.Segment
	if !sum.Detail || !s.Enabled || s.StoreOK == nil || *s.StoreOK || s.TagsKnown == nil || *s.TagsKnown != 300 ||
		s.TagsInUse != 200 || s.IDsPerSec != ids || sum.Snowflake == nil {
		t.Errorf("summary: %+v", sum)
	}
	if len(sum.Degraded) != maxReasons || sum.DegradedCount != len(g.reasons)+1 || sum.Degraded[0] != g.reasons[0] {
		t.Errorf("reasons: %d of %d, first %q", len(sum.Degraded), sum.DegradedCount, sum.Degraded[0])
	}
	// The busiest: 49 IDs/s (t199, then t049 which issued fewer), 48, ...
	if len(s.Top) != defaultTopTags {
		t.Fatalf("%d top tags, want %d", len(s.Top), defaultTopTags)
	}
	want := slices.Clone(g.st)
	slices.SortFunc(want, func(a, b leaf.SegmentStatus) int {
		if leaf.Busier(&a, &b) {
			return -1
		}
		return 1
	})
	for i, got := range s.Top {
		if got.Tag != want[i].Tag {
			t.Errorf("top %d: %s (%v IDs/s, %d issued), want %s", i, got.Tag, got.Rate, got.Issued, want[i].Tag)
		}
	}
	if s.Top[0].Tag != "t199" || s.Top[1].Tag != "t049" || s.Top[2].Rate != 48 {
		t.Errorf("top: %+v, want t199 and t049 at 49 IDs/s, then 48", s.Top[:3])
	}
	if len(s.DegradedTags) != maxDegradedTags || s.DegradedTagsCount != 111 {
		t.Errorf("%d degraded tags of %d, want %d of 111", len(s.DegradedTags), s.DegradedTagsCount, maxDegradedTags)
	}
	if d := s.DegradedTags[7]; d.Tag != "t035" || d.Reason != g.reasons[8] || d.Issued != 1035 {
		t.Errorf("degraded tag 7: %+v, want t035 with its reason and buffers", d)
	}
	if d := s.DegradedTags[6]; d.Tag != "t030" || d.Issued != 0 {
		t.Errorf("degraded tag 6: %+v, want t030 (not in use) without buffers", d)
	}

	get("/v2/status/summary?top=50", nil)
	if len(sum.Segment.Top) != 50 {
		t.Errorf("top=50: %d tags", len(sum.Segment.Top))
	}
	get("/v2/status/summary?top=0", nil)
	if len(sum.Segment.Top) != 0 || sum.Segment.TagsKnown == nil {
		t.Errorf("top=0: %d tags", len(sum.Segment.Top))
	}
	for _, q := range []string{"top=51", "top=-1", "top=x", "detail=maybe"} {
		if r := do(t, "GET", base, "/v2/status/summary?"+q, ""); r.status != 400 {
			t.Errorf("?%s: %d %s, want 400", q, r.status, r.body)
		}
	}
	if r := do(t, "POST", base, "/v2/status/summary", ""); r.status != 405 {
		t.Errorf("POST: %d, want 405", r.status)
	}

	// With an admin token: the header only without it, 401 with a wrong
	// one, everything with the right one.
	base, _ = testServerConfig(t, Config{Segment: g, Snowflake: newFakeSnowflake(), AdminToken: testToken})
	get("/v2/status/summary", nil)
	if sum.Detail || sum.Segment.TagsKnown != nil || sum.Segment.Top != nil || sum.Snowflake != nil ||
		sum.Degraded[0] != "segment store unreachable since 2024-05-01T12:00:00Z" || *sum.Segment.StoreOK {
		t.Errorf("summary without the token: %+v", sum)
	}
	if r := doHeader(t, "GET", base, "/v2/status/summary", "", http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}); r.status != 401 {
		t.Errorf("wrong token: %d", r.status)
	}
	get("/v2/status/summary", http.Header{"Authorization": {"Bearer " + testToken}})
	if !sum.Detail || len(sum.Segment.Top) != defaultTopTags {
		t.Errorf("summary with the token: %+v", sum)
	}

	// A healthy generator with no tags.
	base, _ = testServer(t, newFakeGen())
	get("/v2/status/summary", nil)
	if !*sum.Segment.StoreOK || *sum.Segment.TagsKnown != 0 || sum.Segment.Top == nil || sum.Segment.DegradedTags == nil ||
		sum.Degraded == nil || len(sum.Degraded) != 0 {
		t.Errorf("empty summary: %+v", sum)
	}
	// Segment mode off.
	base, _ = testServer(t, nil)
	get("/v2/status/summary", nil)
	if sum.Segment.Enabled || sum.Segment.TagsKnown != nil {
		t.Errorf("summary without segment mode: %+v", sum)
	}
	if n := g.statusCalls.Load(); n != 0 {
		t.Errorf("the summary read every tag's status %d times", n)
	}
}
