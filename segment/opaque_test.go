package segment_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/tagshape"
)

var (
	testKey  = []byte("0123456789abcdef0123456789abcdef")
	otherKey = []byte("fedcba9876543210fedcba9876543210")
)

// syncBuffer is a log destination safe for the generator's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// opaqueGen makes a generator holding key (nil: none) on st, logging to log.
func opaqueGen(t *testing.T, st leaf.SegmentStore, key []byte, log *syncBuffer, tweaks ...func(*segment.Config)) *segment.Generator {
	t.Helper()
	return newGen(t, settings(st, append([]func(*segment.Config){func(s *segment.Config) {
		s.OpaqueKey = key
		if log != nil {
			s.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}}, tweaks...)...))
}

func createOpaque(t *testing.T, g *segment.Generator, a leaf.Alloc, bits int, key []byte) {
	t.Helper()
	if err := g.CreateShapedTag(bg, a, leaf.TagShape{OpaqueBits: bits, KeyCheck: tagshape.KeyCheck(key)}); err != nil {
		t.Fatal(err)
	}
}

// An opaque tag's IDs are its raw IDs through the tag's permutation, from
// every method; they decode back; its ranges are refused; and the key is in
// no log line.
func TestOpaqueTag(t *testing.T) {
	st := testutil.Store(t)
	var log syncBuffer
	g := opaqueGen(t, st, testKey, &log)
	createOpaque(t, g, leaf.Alloc{Tag: "o", MaxID: 1, Step: 10}, 32, testKey)
	perm, err := tagshape.NewPerm(testKey, "o", 32)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	got = append(got, next(t, g, "o"))
	id, key, err := g.NextIDPeriod(bg, "o")
	if err != nil || key != "" {
		t.Fatalf("NextIDPeriod = %d %q %v", id, key, err)
	}
	got = append(got, id)
	if got, err = g.NextIDs(bg, "o", 25, got); err != nil {
		t.Fatal(err)
	}
	// The batch's IDs increase, as a batch's always do: raw 3..27 encoded,
	// then sorted.
	if !slices.IsSorted(got[2:]) {
		t.Fatalf("batch %v does not increase", got[2:])
	}
	raws := append([]int64(nil), got[:2]...)
	for _, id := range got[2:] {
		d, err := g.Decode(bg, "o", strconv.FormatInt(id, 10))
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, d.Raw)
	}
	slices.Sort(raws[2:])
	want := make([]int64, len(got))
	for i := range want {
		want[i], _ = perm.Encode(int64(i + 1))
	}
	slices.Sort(want[2:])
	if !slices.Equal(got, want) {
		t.Fatalf("IDs %v, want the encodings of 1..27 (the batch's sorted): %v", got, want)
	}
	for i, id := range got {
		if i >= 2 {
			break // the batch's order is not the raw order
		}
		want, _ := perm.Encode(int64(i + 1))
		if id != want {
			t.Fatalf("ID %d is %d, want Encode(%d) = %d", i, id, i+1, want)
		}
		d, err := g.Decode(bg, "o", strconv.FormatInt(id, 10))
		if err != nil || d.Raw != int64(i+1) {
			t.Fatalf("Decode(%d) = %+v, %v; want raw %d", id, d, err, i+1)
		}
	}
	if _, _, err := g.NextRange(bg, "o", 10); !errors.Is(err, leaf.ErrOpaqueRange) {
		t.Fatalf("NextRange of an opaque tag: %v, want ErrOpaqueRange", err)
	}
	// Decoding an ID the tag has not issued: past the row, or outside the width.
	unissued, _ := perm.Encode(testutil.MaxID(t, st, "o"))
	for _, id := range []string{strconv.FormatInt(unissued, 10), "0", "4294967296", "x"} {
		if _, err := g.Decode(bg, "o", id); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Decode(%s): %v, want ErrInvalidArgument", id, err)
		}
	}
	for _, secret := range []string{string(testKey), hex.EncodeToString(testKey)} {
		if strings.Contains(log.String(), secret) {
			t.Fatalf("the key is in the log:\n%s", log.String())
		}
	}
}

// A fresh generator's first request for an opaque tag may be a range: the
// first load finds the tag opaque, and the range is refused all the same.
func TestOpaqueFirstRequestRange(t *testing.T) {
	st := testutil.Store(t)
	createOpaque(t, opaqueGen(t, st, testKey, nil), leaf.Alloc{Tag: "o", MaxID: 1, Step: 10}, 32, testKey)
	g := opaqueGen(t, st, testKey, nil)
	if _, _, err := g.NextRange(bg, "o", 5); !errors.Is(err, leaf.ErrOpaqueRange) {
		t.Fatalf("NextRange: %v, want ErrOpaqueRange", err)
	}
	next(t, g, "o")
}

// A server without the key, or with another, refuses to issue for an opaque
// tag, naming the key checks and never the keys; a plain tag beside it
// issues.
func TestOpaqueKeyRefusals(t *testing.T) {
	st := testutil.Store(t, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 10})
	createOpaque(t, opaqueGen(t, st, testKey, nil), leaf.Alloc{Tag: "o", MaxID: 1, Step: 10}, 20, testKey)
	for _, c := range []struct {
		name string
		key  []byte
		want []string
	}{
		{"no key", nil, []string{"opaque tag o needs segment.opaque_key on this server"}},
		{"another key", otherKey, []string{"tag o was created with another opaque key", tagshape.KeyCheck(testKey), tagshape.KeyCheck(otherKey), "configure the same segment.opaque_key on every server"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log syncBuffer
			g := opaqueGen(t, st, c.key, &log)
			for range 2 { // the refusal stays: the tag's state keeps it
				_, err := g.NextID(bg, "o")
				if !errors.Is(err, leaf.ErrNotReady) {
					t.Fatalf("NextID: %v, want ErrNotReady", err)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
			}
			if _, err := g.NextIDs(bg, "o", 3, nil); !errors.Is(err, leaf.ErrNotReady) {
				t.Fatalf("NextIDs: %v, want ErrNotReady", err)
			}
			next(t, g, "plain")
			if c.key != nil && strings.Contains(log.String(), string(c.key)) || strings.Contains(log.String(), string(testKey)) {
				t.Fatal("a key is in the log")
			}
		})
	}
}

// A 16-bit opaque tag issues exactly its 65535 IDs, all distinct, from
// several servers, each issuing what it reserved below the bound, then
// refuses; so does a formatted tag at its width.
func TestOpaqueBound(t *testing.T) {
	st := testutil.Store(t)
	g0 := opaqueGen(t, st, testKey, nil)
	createOpaque(t, g0, leaf.Alloc{Tag: "o", MaxID: 1, Step: 5000}, 16, testKey)
	gens := []*segment.Generator{g0, opaqueGen(t, st, testKey, nil), opaqueGen(t, st, testKey, nil)}
	var (
		mu  sync.Mutex
		all []int64
		wg  sync.WaitGroup
	)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := gens[i%len(gens)]
			var mine []int64
			for {
				id, err := g.NextID(bg, "o")
				if err == nil {
					mine = append(mine, id)
				}
				if err != nil {
					if !errors.Is(err, leaf.ErrNotReady) || !strings.Contains(err.Error(), "tag o has used all its 2^16 - 1 opaque IDs") {
						t.Errorf("error %v, want the tag's IDs used up", err)
					}
					break
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	testutil.CheckUnique(t, all)
	if len(all) != 65535 {
		t.Fatalf("%d IDs issued, want 65535", len(all))
	}
	for _, g := range gens {
		if _, err := g.NextIDs(bg, "o", 3, nil); !errors.Is(err, leaf.ErrNotReady) {
			t.Fatalf("NextIDs once used up: %v", err)
		}
	}
	for _, id := range all {
		if id < 1 || id > 65535 {
			t.Fatalf("ID %d outside 1..65535", id)
		}
	}

	// A formatted tag of 3 decimal digits stops at 999.
	f := leaf.TagShape{Format: leaf.IDFormat{Width: 3}}
	if err := g0.CreateShapedTag(bg, leaf.Alloc{Tag: "f", MaxID: 990, Step: 4}, f); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for {
		id, err := g0.NextID(bg, "f")
		if err != nil {
			if !strings.Contains(err.Error(), "tag f: format {seq:3} holds sequences up to 999, all issued") {
				t.Fatalf("error %v", err)
			}
			break
		}
		ids = append(ids, id)
	}
	if len(ids) != 10 || ids[9] != 999 {
		t.Fatalf("formatted tag issued %v, want 990..999", ids)
	}
}

// A periodic opaque tag: each period's IDs are its own sequence through the
// permutation, and decode with the period's formatted ID.
func TestOpaquePeriodic(t *testing.T) {
	loc := shanghai(t)
	st := testutil.Store(t)
	clk := testutil.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, loc))
	g := opaqueGen(t, st, testKey, nil, func(s *segment.Config) { s.Now = clk.Now })
	shape := daily
	shape.OpaqueBits, shape.KeyCheck = 24, tagshape.KeyCheck(testKey)
	if err := g.CreateShapedTag(bg, leaf.Alloc{Tag: "p", MaxID: 1, Step: 10}, shape); err != nil {
		t.Fatal(err)
	}
	perm, _ := tagshape.NewPerm(testKey, "p", 24)
	id, key := nextPeriod(t, g, "p")
	if want, _ := perm.Encode(1); id != want || key != "20261123" {
		t.Fatalf("first ID %d %s, want %d 20261123", id, key, want)
	}
	d, err := g.Decode(bg, "p", key+"-"+strconv.FormatInt(id, 10))
	if err != nil || d.Raw != 1 || d.Period != key {
		t.Fatalf("Decode = %+v, %v", d, err)
	}
	if _, err := g.Decode(bg, "p", "20261122-"+strconv.FormatInt(id, 10)); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Fatalf("Decode in a period without IDs: %v", err)
	}
	if _, _, _, err := g.NextRangePeriod(bg, "p", 3); !errors.Is(err, leaf.ErrOpaqueRange) {
		t.Fatalf("NextRangePeriod: %v", err)
	}
	clk.Add(24 * time.Hour)
	if id2, key2 := nextPeriod(t, g, "p"); id2 != id || key2 != "20261124" {
		t.Fatalf("next period's first ID %d %s, want %d 20261124", id2, key2, id)
	}
}

// A key New cannot use is refused by Validate, without the key in the error.
func TestOpaqueKeySetting(t *testing.T) {
	_, err := segment.New(bg, settings(testutil.Store(t), func(s *segment.Config) { s.OpaqueKey = []byte("short") }))
	if !errors.Is(err, leaf.ErrInvalidArgument) && !errors.Is(err, tagshape.ErrInvalidKey) || strings.Contains(err.Error(), "short") {
		t.Fatalf("New with a short key: %v", err)
	}
}
