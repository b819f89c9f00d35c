package segment

import (
	"context"

	"github.com/leafgo/leaf"
)

// row is the row of leaf_alloc a buffer reserves its ranges from and gives
// their unused tail back to: a plain tag's own (its shell's), one period's
// of a periodic tag, or the Row an extension's kind gave (extend.go). A buffer is the double buffer of one row; the row is set when the
// buffer is made, before its first load.
type row interface {
	reserve(ctx context.Context, step int) (leaf.Reservation, error)
	giveBack(ctx context.Context, from, expect int64) (bool, error)
	// admit checks a range about to be issued (an extension's Row.Admit).
	admit(start, end int64) error
	// shell is the buffer of the tag the row belongs to: a period's or a
	// kind's row is missing only with its tag's, and the whole tag
	// goes.
	shell() *buffer
	// period is the row's period key, "" but for a period's row.
	period() string
}

// tagRow is a tag's own row, which its shell reserves from.
type tagRow struct{ b *buffer }

func (r tagRow) reserve(ctx context.Context, step int) (leaf.Reservation, error) {
	return r.b.g.s.Store.Reserve(ctx, r.b.tag, step)
}

func (r tagRow) giveBack(ctx context.Context, from, expect int64) (bool, error) {
	return r.b.g.s.Store.GiveBack(ctx, r.b.tag, from, expect)
}

func (tagRow) admit(int64, int64) error { return nil }
func (r tagRow) shell() *buffer         { return r.b }
func (tagRow) period() string           { return "" }

// periodRow is the row of one period of a periodic tag.
type periodRow struct {
	p   *periodic
	key string
}

func (r periodRow) reserve(ctx context.Context, step int) (leaf.Reservation, error) {
	return r.p.g.periods.ReservePeriod(ctx, r.p.tag, r.key, step)
}

func (r periodRow) giveBack(ctx context.Context, from, expect int64) (bool, error) {
	return r.p.g.periods.GiveBackPeriod(ctx, r.p.tag, r.key, from, expect)
}

func (periodRow) admit(int64, int64) error { return nil }
func (r periodRow) shell() *buffer         { return r.p.shell }
func (r periodRow) period() string         { return r.key }
