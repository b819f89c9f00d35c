package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
	"github.com/leafgo/leaf/tagshape"
)

// 'leaf tags create --opaque-bits' needs the key serve reads, stores only
// its check; 'leaf decode --tag' maps the IDs a generator issued back; the
// key is in no output and nowhere in the store's files.
func TestOpaqueTagsCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"LEAF_DATA_DIR=" + dir}
	const keyHex = "3f9c2a7be1d04c6a8f5e2b1d9c7a6e4f0b3d5c8a1e2f4b6d7c9a0e1f2b3c4d5e"
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(keyHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := tagshape.ParseKey(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string
	run := func(wantCode int, args ...string) result {
		t.Helper()
		r := runCLI(t, env, args...)
		if r.code != wantCode {
			t.Fatalf("leaf %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
		}
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}
	if r := run(2, "tags", "create", "o", "--opaque-bits", "20"); !strings.Contains(r.stderr, "opaque tags need segment.opaque_key") {
		t.Errorf("without a key: %s", r.stderr)
	}
	if r := run(2, "tags", "create", "o", "--opaque-bits", "20", "--format", "{seq:5}", "--opaque-key-file", keyFile); !strings.Contains(r.stderr, "format width 5") {
		t.Errorf("with a narrow format: %s", r.stderr)
	}
	run(0, "tags", "create", "o", "--opaque-bits", "20", "--step", "10", "--opaque-key-file", keyFile)
	run(0, "tags", "get", "o", "--json")

	// Issue a few IDs as a server would.
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	shape, err := st.TagShape(ctx, "o")
	if err != nil || shape.KeyCheck != tagshape.KeyCheck(key) || shape.OpaqueBits != 20 {
		t.Fatalf("stored shape %+v, %v; want 20 bits and the key's check", shape, err)
	}
	s := segment.DefaultConfig()
	s.Store, s.OpaqueKey = st, key
	g, err := segment.New(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if ids, err = g.NextIDs(ctx, "o", 5, nil); err != nil {
		t.Fatal(err)
	}
	g.Close(ctx)
	st.Close()

	// The batch increases; its raw IDs are 1..5 in some order.
	var raws []int64
	for _, id := range ids {
		r := run(0, "decode", "--tag", "o", "--json", "--opaque-key-file", keyFile, strconv.FormatInt(id, 10))
		var d decodedID
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Tag != "o" {
			t.Fatalf("decode %d: %q (%v)", id, r.stdout, err)
		}
		raws = append(raws, d.Raw)
	}
	if slices.Sort(raws); !slices.Equal(raws, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("decoded raw IDs %v, want 1..5", raws)
	}
	run(2, "decode", "--tag", "o", "--opaque-key-file", keyFile, "1048576") // past 20 bits
	if r := run(1, "decode", "--tag", "o", strconv.FormatInt(ids[0], 10)); !strings.Contains(r.stderr, "needs segment.opaque_key") {
		t.Errorf("decode without the key: %s", r.stderr)
	}

	// The key is in no output and in no file of the store: only its check.
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(b))
	}
	for _, out := range outputs {
		if strings.Contains(strings.ToLower(out), keyHex) || strings.Contains(out, string(key)) {
			t.Fatalf("the key leaked: %q", out)
		}
	}
}
