package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
	"github.com/leafgo/leaf/tagshape"
)

// sqliteServer serves the real generator on a real SQLite store.
func sqliteServer(t *testing.T) string {
	t.Helper()
	return sqliteServerWith(t, nil)
}

// sqliteServerWith is sqliteServer with tweak (if not nil) applied to the
// generator's settings.
func sqliteServerWith(t *testing.T, tweak func(*segment.Config)) string {
	t.Helper()
	st, err := sqlite.Open(t.Context(), testutil.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	set := segment.DefaultConfig()
	set.Store, set.Logger = st, slog.New(slog.NewTextHandler(io.Discard, nil))
	if tweak != nil {
		tweak(&set)
	}
	g, err := segment.New(t.Context(), set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	base, _ := testServerConfig(t, Config{Segment: g, Tags: st})
	return base
}

// formattedAnswer is a /v2 segment answer with its formatted members.
type formattedAnswer struct {
	Tag       string   `json:"tag"`
	ID        int64    `json:"id"`
	IDStr     string   `json:"id_str"`
	IDs       []int64  `json:"ids"`
	IDsStr    []string `json:"ids_str"`
	Period    string   `json:"period"`
	Formatted any      `json:"formatted"`
}

func createTag(t *testing.T, base, body string) {
	t.Helper()
	if r := do(t, "POST", base, "/v2/tags", body); r.status != 201 {
		t.Fatalf("create %s: %d %s", body, r.status, r.body)
	}
}

// Every radix round-trips through the real /v2 routes: each formatted ID
// parses back, with tagshape.Parse, to the number beside it, and all are
// unique.
func TestFormattedRoundTrip(t *testing.T) {
	base := sqliteServer(t)
	for _, c := range []struct {
		tag, spec string
		period    leaf.Period
	}{
		{"dec", "ORD-{seq:8}", leaf.PeriodNone},
		{"b36", "INV{seq:6:36}", leaf.PeriodNone},
		{"b62", "{seq:0:62}", leaf.PeriodNone},
		{"daily", "D.{period}-{seq:5:62}", leaf.PeriodDay},
	} {
		t.Run(c.tag, func(t *testing.T) {
			body := fmt.Sprintf(`{"tag":%q,"start":3800,"step":50,"format":%q}`, c.tag, c.spec)
			if c.period != leaf.PeriodNone {
				body = fmt.Sprintf(`{"tag":%q,"step":50,"format":%q,"period":%q}`, c.tag, c.spec, c.period)
			}
			createTag(t, base, body)
			shape, err := tagshape.ParseSpecFor(c.spec, c.period)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			check := func(s string, id int64, period string) {
				t.Helper()
				key, seq, err := tagshape.Parse(shape, c.period, s)
				if err != nil || seq != id || key != period {
					t.Fatalf("Parse(%q) = %q %d, %v; want %q %d", s, key, seq, err, period, id)
				}
				if seen[s] {
					t.Fatalf("formatted ID %q answered twice", s)
				}
				seen[s] = true
			}
			for range 60 {
				var a formattedAnswer
				decodeStrict(t, do(t, "GET", base, "/v2/segment/"+c.tag, ""), &a)
				f, ok := a.Formatted.(string)
				if !ok {
					t.Fatalf("single answer: formatted %v, want a string", a.Formatted)
				}
				check(f, a.ID, a.Period)
			}
			var a formattedAnswer
			decodeStrict(t, do(t, "POST", base, "/v2/segment/"+c.tag+"/batch?count=120", ""), &a)
			fs, ok := a.Formatted.([]any)
			if !ok || len(fs) != len(a.IDs) || len(fs) != 120 {
				t.Fatalf("batch answer: formatted %v for %d IDs", a.Formatted, len(a.IDs))
			}
			for i, f := range fs {
				check(f.(string), a.IDs[i], a.Period)
			}
			wantError(t, "range", do(t, "GET", base, "/v2/segment/"+c.tag+"/range?count=10", ""), 400, "formatted_tag",
				"tag "+c.tag+" has the ID format "+c.spec, "cannot be leased")
		})
	}
}

// A sequence that outgrows its format's width is answered 503 with a
// message naming the tag, the format and the largest sequence, never with a
// truncated or longer ID: a width of 2 writes 1..99 and then refuses.
func TestFormattedWidthExceeded(t *testing.T) {
	base := sqliteServer(t)
	createTag(t, base, `{"tag":"tiny","start":1,"step":30,"format":"T{seq:2}"}`)
	for want := int64(1); want <= 99; want++ {
		var a formattedAnswer
		decodeStrict(t, do(t, "GET", base, "/v2/segment/tiny", ""), &a)
		if f := fmt.Sprintf("T%02d", want); a.ID != want || a.Formatted != f {
			t.Fatalf("ID %d %v, want %d %s", a.ID, a.Formatted, want, f)
		}
	}
	for _, target := range []string{"/v2/segment/tiny", "/v2/segment/tiny/batch?count=3"} {
		r := do(t, "GET", base, target, "")
		wantError(t, target, r, 503, "format_exhausted", "tag tiny", "T{seq:2}", "up to 99")
		if strings.Contains(r.body, `"formatted"`) || strings.Contains(r.body, `"id"`) {
			t.Errorf("%s: an ID in the refusal: %s", target, r.body)
		}
	}
	// A batch that crosses the width is refused whole.
	createTag(t, base, `{"tag":"tiny2","start":1,"step":100,"format":"{seq:2:36}"}`)
	var a formattedAnswer
	decodeStrict(t, do(t, "POST", base, "/v2/segment/tiny2/batch?count=1000", ""), &a)
	if n := len(a.IDs); n != 1000 || a.Formatted.([]any)[999] != "rs" {
		t.Fatalf("batch of 1000 in radix 36: %d IDs, last %v", n, a.Formatted.([]any)[n-1])
	}
	r := do(t, "POST", base, "/v2/segment/tiny2/batch?count=1000", "") // 1001..2000 crosses 1295
	wantError(t, "crossing batch", r, 503, "format_exhausted", "tag tiny2", "{seq:2:36}", "up to 1295")
}

// Many goroutines take formatted IDs of one tag at once: every formatted
// ID is unique and parses back to its number.
func TestFormattedHammer(t *testing.T) {
	base := sqliteServer(t)
	createTag(t, base, `{"tag":"ham","step":100,"format":"H-{seq:7:62}"}`)
	f := leaf.IDFormat{Prefix: "H-", Width: 7, Radix: leaf.Radix62}
	const workers, each = 8, 40
	var mu sync.Mutex
	seen := map[string]int64{}
	var wg sync.WaitGroup
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				target := "/v2/segment/ham"
				if (w+i)%2 == 1 {
					target = "/v2/segment/ham/batch?count=7"
				}
				resp, err := http.Get(base + target)
				if err != nil {
					fail(err)
					return
				}
				var a formattedAnswer
				err = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					fail(fmt.Errorf("%s: %d %v", target, resp.StatusCode, err))
					return
				}
				ids, fs := []int64{a.ID}, []any{a.Formatted}
				if a.IDs != nil {
					ids, fs = a.IDs, a.Formatted.([]any)
				}
				mu.Lock()
				for j, x := range fs {
					s := x.(string)
					if _, seq, err := tagshape.Parse(f, leaf.PeriodNone, s); err != nil || seq != ids[j] {
						errs = append(errs, fmt.Errorf("Parse(%q) = %d, %v; want %d", s, seq, err, ids[j]))
					}
					if prev, dup := seen[s]; dup {
						errs = append(errs, fmt.Errorf("%q answered twice (IDs %d, %d)", s, prev, ids[j]))
					}
					seen[s] = ids[j]
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if want := workers * each / 2 * (1 + 7); len(seen) != want {
		t.Errorf("%d formatted IDs, want %d", len(seen), want)
	}
}
