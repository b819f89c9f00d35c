package snowflake

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

func TestLayoutValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		l    Layout
		ok   bool
	}{
		{"leaf", LeafLayout, true},
		{"one worker", Layout{Epoch: LeafEpoch, TimeBits: 41, WorkerBits: 0, SequenceBits: 12}, true},
		{"fewer bits", Layout{Epoch: LeafEpoch, TimeBits: 41, WorkerBits: 8, SequenceBits: 10}, true},
		{"64 bits", Layout{Epoch: LeafEpoch, TimeBits: 42, WorkerBits: 10, SequenceBits: 12}, false},
		{"no sequence", Layout{Epoch: LeafEpoch, TimeBits: 41, WorkerBits: 10}, false},
		{"no time", Layout{Epoch: LeafEpoch, WorkerBits: 10, SequenceBits: 12}, false},
		{"negative worker bits", Layout{Epoch: LeafEpoch, TimeBits: 41, WorkerBits: -1, SequenceBits: 12}, false},
		{"negative epoch", Layout{Epoch: -1, TimeBits: 41, WorkerBits: 10, SequenceBits: 12}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.l.Validate()
			if (err == nil) != c.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, leaf.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
		})
	}
}

// Leaf's own example (LEAF-REFERENCE §1.7): the fork's README ID decodes to
// worker 619, sequence 18, 1588421624602.
func TestDecodeLeafExample(t *testing.T) {
	p, err := LeafLayout.Decode(1256557484213448722)
	if err != nil {
		t.Fatal(err)
	}
	if p.WorkerID != 619 || p.Sequence != 18 || p.Timestamp != 1588421624602 {
		t.Fatalf("Decode = %+v, want worker 619 sequence 18 timestamp 1588421624602", p)
	}
}

// Compose and Decode are inverses for random parts of random valid layouts.
func TestComposeDecodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100_000; i++ {
		l := LeafLayout
		if i%2 == 1 {
			l.SequenceBits = 1 + r.IntN(20)
			l.WorkerBits = r.IntN(min(21, 63-l.SequenceBits-30))
			l.TimeBits = 30 + r.IntN(63-l.SequenceBits-l.WorkerBits-30+1)
			l.Epoch = r.Int64N(2_000_000_000_000)
		}
		ms := l.Epoch + r.Int64N(int64(1)<<l.TimeBits)
		w := r.Int64N(l.MaxWorkerID() + 1)
		s := r.Int64N(l.MaxSequence() + 1)
		id, err := l.Compose(ms, w, s)
		if err != nil {
			t.Fatalf("%s: Compose(%d, %d, %d): %v", l, ms, w, s, err)
		}
		if id == 0 && ms == l.Epoch && w == 0 && s == 0 {
			continue // the one part combination that is ID 0
		}
		p, err := l.Decode(id)
		if err != nil || p.Timestamp != ms || p.WorkerID != w || p.Sequence != s || p.ID != id {
			t.Fatalf("%s: Decode(Compose(%d, %d, %d) = %d) = %+v, %v", l, ms, w, s, id, p, err)
		}
	}
}

func TestComposeAndDecodeRejectOutOfRange(t *testing.T) {
	l := LeafLayout
	for _, c := range []struct{ ms, w, s int64 }{
		{l.Epoch - 1, 0, 0}, {l.End(), 0, 0}, {l.Epoch, 1024, 0}, {l.Epoch, -1, 0}, {l.Epoch, 0, 4096}, {l.Epoch, 0, -1},
	} {
		if _, err := l.Compose(c.ms, c.w, c.s); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Compose(%d, %d, %d) = %v, want ErrInvalidArgument", c.ms, c.w, c.s, err)
		}
	}
	narrow := Layout{Epoch: LeafEpoch, TimeBits: 31, WorkerBits: 10, SequenceBits: 12}
	for _, id := range []int64{0, -1, -1 << 63, 1 << 53} {
		if _, err := narrow.Decode(id); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Decode(%d) = %v, want ErrInvalidArgument", id, err)
		}
	}
}

// The js-safe preset's documented life and the 2^53 bound: the largest ID
// it can compose, at the last millisecond of that life with the largest
// worker ID and sequence, is Number.MAX_SAFE_INTEGER, which a float64 (a
// JavaScript number) holds exactly.
func TestJSSafeLayoutBound(t *testing.T) {
	l := JSSafeLayout
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := time.UnixMilli(l.Epoch).UTC(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("epoch %s, want %s", got, want)
	}
	lastMs := l.End() - 1
	if got, want := time.UnixMilli(lastMs).UTC(), time.Date(2060, 11, 3, 19, 53, 47, 775e6, time.UTC); !got.Equal(want) {
		t.Errorf("last millisecond %s, want %s (docs/configuration.md's)", got, want)
	}
	if l.MaxWorkerID() != 31 || l.MaxSequence() != 255 {
		t.Errorf("%d workers, %d IDs per ms; want 32 and 256", l.MaxWorkerID()+1, l.MaxSequence()+1)
	}
	top, err := l.Compose(lastMs, l.MaxWorkerID(), l.MaxSequence())
	if err != nil {
		t.Fatal(err)
	}
	if top != MaxJSSafeID || top != l.MaxID() || top >= 1<<53 {
		t.Fatalf("largest ID %d, MaxID %d; want %d < 2^53", top, l.MaxID(), int64(MaxJSSafeID))
	}
	if int64(float64(top)) != top || int64(float64(top-1)) != top-1 {
		t.Errorf("a float64 does not hold %d exactly", top)
	}
	if _, err := l.Compose(l.End(), 0, 0); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("Compose after the end: %v", err)
	}
	for _, id := range []int64{1 << 53, MaxJSSafeID + 1, LeafLayout.MaxID()} {
		if _, err := l.Decode(id); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("Decode(%d) = %v, want ErrInvalidArgument: no js-safe ID is that large", id, err)
		}
	}
	if LeafLayout.MaxID() != math.MaxInt64 {
		t.Errorf("LeafLayout.MaxID() = %d", LeafLayout.MaxID())
	}
}

// Compose and Decode are inverses over the preset's whole range, its
// corners included.
func TestJSSafeDecodeRoundTrip(t *testing.T) {
	l := JSSafeLayout
	r := rand.New(rand.NewPCG(3, 4))
	type parts struct{ ms, w, s int64 }
	cases := []parts{
		{l.Epoch, 0, 1}, {l.Epoch, l.MaxWorkerID(), l.MaxSequence()}, {l.End() - 1, 0, 0},
		{l.End() - 1, l.MaxWorkerID(), l.MaxSequence()}, {l.End() - 1, l.MaxWorkerID(), 0},
	}
	for range 100_000 {
		cases = append(cases, parts{l.Epoch + r.Int64N(1<<l.TimeBits), r.Int64N(l.MaxWorkerID() + 1), r.Int64N(l.MaxSequence() + 1)})
	}
	for _, c := range cases {
		id, err := l.Compose(c.ms, c.w, c.s)
		if err != nil {
			t.Fatalf("Compose(%+v): %v", c, err)
		}
		if id == 0 {
			continue
		}
		if id > MaxJSSafeID {
			t.Fatalf("Compose(%+v) = %d, above 2^53 - 1", c, id)
		}
		p, err := l.Decode(id)
		if err != nil || p != (leaf.SnowflakeParts{ID: id, Timestamp: c.ms, WorkerID: c.w, Sequence: c.s}) {
			t.Fatalf("Decode(Compose(%+v) = %d) = %+v, %v", c, id, p, err)
		}
	}
}

func TestLayoutNames(t *testing.T) {
	for _, c := range []struct {
		l    Layout
		name string
	}{
		{LeafLayout, LayoutLeaf},
		{JSSafeLayout, LayoutJSSafe},
		{Layout{Epoch: JSSafeEpoch, TimeBits: 41, WorkerBits: 4, SequenceBits: 8}, LayoutCustom},
		{Layout{Epoch: LeafEpoch + 1, TimeBits: 41, WorkerBits: 10, SequenceBits: 12}, LayoutCustom},
	} {
		if got := c.l.Name(); got != c.name {
			t.Errorf("%s: Name() = %q, want %q", c.l, got, c.name)
		}
	}
	for _, name := range []string{LayoutLeaf, LayoutJSSafe} {
		l, err := Preset(name)
		if err != nil || l.Name() != name {
			t.Errorf("Preset(%q) = %s, %v", name, l, err)
		}
	}
	for _, name := range []string{LayoutCustom, "", "JS-safe", "js_safe"} {
		if _, err := Preset(name); !errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), "the presets are leaf and js-safe") {
			t.Errorf("Preset(%q): %v", name, err)
		}
	}
}
