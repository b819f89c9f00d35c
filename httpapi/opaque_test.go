package httpapi

import (
	"context"
	"encoding/hex"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/tagshape"
)

// An opaque tag over HTTP: created with the server's key check (400
// without a key), issued opaque on /v2 and the Leaf routes, its ranges 409,
// decoded back; the key in no answer.
func TestOpaqueTagRoutes(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	st := testutil.Store(t)
	newServer := func(key []byte) string {
		set := segment.DefaultConfig()
		set.Store, set.Logger, set.OpaqueKey = st, slog.New(slog.DiscardHandler), key
		g, err := segment.New(t.Context(), set)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close(context.Background()) })
		base, _ := testServerConfig(t, Config{Segment: g, Tags: st})
		return base
	}
	base, keyless := newServer(key), newServer(nil)
	var answers []string
	call := func(base, method, path, body string) response {
		t.Helper()
		r := do(t, method, base, path, body)
		answers = append(answers, r.body)
		return r
	}

	r := call(keyless, "POST", "/v2/tags", `{"tag":"o","opaque_bits":24}`)
	wantError(t, "keyless create", r, 400, "invalid_argument", "opaque tags need segment.opaque_key")
	r = call(base, "POST", "/v2/tags", `{"tag":"o","opaque_bits":24,"format":"{seq:5}"}`)
	wantError(t, "narrow format", r, 400, "invalid_argument", "format width 5")
	if r = call(base, "POST", "/v2/tags", `{"tag":"o","opaque_bits":24,"step":10}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if sh, _ := st.TagShape(t.Context(), "o"); sh.KeyCheck != tagshape.KeyCheck(key) {
		t.Fatalf("stored key check %q", sh.KeyCheck)
	}
	perm, _ := tagshape.NewPerm(key, "o", 24)
	want1, _ := perm.Encode(1)
	want2, _ := perm.Encode(2)
	if r = call(base, "GET", "/api/segment/get/o", ""); r.body != strconv.FormatInt(want1, 10) {
		t.Fatalf("Leaf route: %q, want %d", r.body, want1)
	}
	if r = call(base, "GET", "/v2/segment/o", ""); !strings.Contains(r.body, strconv.FormatInt(want2, 10)) {
		t.Fatalf("/v2: %q, want %d", r.body, want2)
	}
	// Batches are opaque too, and increase as every batch does.
	r = call(base, "GET", "/api/segment/get/o?count=5", "")
	var batch []int64
	for _, f := range strings.Fields(r.body) {
		id, _ := strconv.ParseInt(f, 10, 64)
		batch = append(batch, id)
	}
	if r.status != 200 || len(batch) != 5 || !slices.IsSorted(batch) {
		t.Fatalf("Leaf batch: %d %q, want 5 increasing IDs", r.status, r.body)
	}
	if r = call(base, "GET", "/v2/segment/o/batch?count=5", ""); r.status != 200 {
		t.Fatalf("/v2 batch: %d %q", r.status, r.body)
	}
	r = call(base, "GET", "/v2/segment/o/range?count=3", "")
	wantError(t, "range", r, 409, "opaque_range")
	r = call(keyless, "GET", "/v2/segment/o", "")
	wantError(t, "keyless issue", r, 503, "not_ready")
	r = call(base, "GET", "/v2/tags/o/decode?id="+strconv.FormatInt(want2, 10), "")
	if r.status != 200 || r.body != `{"tag":"o","id":"`+strconv.FormatInt(want2, 10)+`","raw":2}`+"\n" {
		t.Fatalf("decode: %d %q", r.status, r.body)
	}
	r = call(base, "GET", "/v2/tags/o/decode?id=16777216", "")
	wantError(t, "decode past the width", r, 400, "invalid_argument", "outside 1..16777215")
	r = call(base, "GET", "/v2/tags/o/decode?id=x", "")
	wantError(t, "decode x", r, 400, "invalid_argument", "want a positive number")
	for _, path := range []string{"/v2/tags/o", "/db", "/cache", "/v2/tags"} {
		call(base, "GET", path, "")
	}
	// The status (and the monitor page) say the tag is opaque.
	if r = call(base, "GET", "/v2/status?detail=1", ""); !strings.Contains(r.body, `"tag":"o","opaque_bits":24,`) {
		t.Errorf("/v2/status does not show the tag opaque: %s", r.body)
	}
	for _, a := range answers {
		if strings.Contains(a, string(key)) || strings.Contains(a, hex.EncodeToString(key)) {
			t.Fatalf("the key is in an answer: %q", a)
		}
	}
}
