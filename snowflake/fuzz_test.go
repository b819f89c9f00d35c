package snowflake_test

import (
	"errors"
	"math"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/snowflake"
)

// FuzzDecode takes arbitrary int64s apart with Leaf's layout, the js-safe
// one and arbitrary layouts that pass Validate.
//
// Properties: Decode refuses, with ErrInvalidArgument, exactly the IDs that
// are not positive or have bits above the layout's width; what it accepts
// has every part in range (time in [Epoch, End()), worker and sequence within
// their bits) and composes back to the same ID.
func FuzzDecode(f *testing.F) {
	l := snowflake.LeafLayout
	for _, id := range []int64{
		1256557484213448722, // Leaf's example: worker 619, sequence 18
		1263177670456266794, // worker 5, sequence 42, 1590000000000 ms
		2124569752515903566, // the README's
		1, 0, -1, math.MaxInt64, math.MinInt64, 1 << 62, 1<<63 - 1<<22,
		231554233484074, snowflake.MaxJSSafeID, snowflake.MaxJSSafeID + 1, // js-safe: docs/configuration.md's, the largest, too large
	} {
		f.Add(id, l.Epoch, uint8(l.TimeBits), uint8(l.WorkerBits), uint8(l.SequenceBits))
	}
	f.Add(int64(1<<40), int64(0), uint8(41), uint8(0), uint8(12))             // one worker
	f.Add(int64(1<<40), int64(1700000000000), uint8(41), uint8(8), uint8(10)) // fewer bits
	f.Add(int64(math.MaxInt64), int64(0), uint8(1), uint8(61), uint8(1))
	f.Add(int64(math.MaxInt64), int64(0), uint8(62), uint8(0), uint8(1))
	f.Add(int64(12345), int64(math.MaxInt64-1<<41), uint8(41), uint8(10), uint8(12))
	f.Fuzz(func(t *testing.T, id, epoch int64, timeBits, workerBits, seqBits uint8) {
		checkDecode(t, snowflake.LeafLayout, id)
		checkDecode(t, snowflake.JSSafeLayout, id)
		l := snowflake.Layout{Epoch: epoch, TimeBits: int(timeBits), WorkerBits: int(workerBits), SequenceBits: int(seqBits)}
		if err := l.Validate(); err != nil {
			if !errors.Is(err, leaf.ErrInvalidArgument) {
				t.Fatalf("%+v: Validate = %v, not ErrInvalidArgument", l, err)
			}
			return
		}
		checkDecode(t, l, id)
	})
}

func checkDecode(t *testing.T, l snowflake.Layout, id int64) {
	t.Helper()
	p, err := l.Decode(id)
	total := l.TimeBits + l.WorkerBits + l.SequenceBits
	fits := id > 0 && (total >= 63 || id>>total == 0)
	if fits != (err == nil) {
		t.Fatalf("%s: Decode(%d) = %+v, %v; the ID fits the layout: %v", l, id, p, err, fits)
	}
	if err != nil {
		if !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Fatalf("%s: Decode(%d) = %v, not ErrInvalidArgument", l, id, err)
		}
		return
	}
	if p.ID != id || p.Timestamp < l.Epoch || p.Timestamp >= l.End() ||
		p.WorkerID < 0 || p.WorkerID > l.MaxWorkerID() || p.Sequence < 0 || p.Sequence > l.MaxSequence() {
		t.Fatalf("%s: Decode(%d) = %+v: a part is out of range (time [%d, %d), worker <= %d, sequence <= %d)",
			l, id, p, l.Epoch, l.End(), l.MaxWorkerID(), l.MaxSequence())
	}
	back, err := l.Compose(p.Timestamp, p.WorkerID, p.Sequence)
	if err != nil || back != id {
		t.Fatalf("%s: Compose(Decode(%d) = %+v) = %d, %v", l, id, p, back, err)
	}
}
