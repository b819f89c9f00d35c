package snowflake

import (
	"errors"
	"math/rand/v2"
	"testing"

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
