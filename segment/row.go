package segment

import (
	"context"
	"errors"

	"github.com/leafgo/leaf"
)

// row is the row of leaf_alloc a buffer reserves its ranges from and gives
// their unused tail back to: a plain tag's own (its shell's), one period's
// of a periodic tag, or an ordered tag's under one ownership's fencing
// token. A buffer is the double buffer of one row; the row is set when the
// buffer is made, before its first load.
type row interface {
	reserve(ctx context.Context, step int) (leaf.Reservation, error)
	giveBack(ctx context.Context, from, expect int64) (bool, error)
	// admit checks a range about to be issued: an ownership's order.
	admit(start, end int64) error
	// shell is the buffer of the tag the row belongs to: a period's or an
	// ownership's row is missing only with its tag's, and the whole tag
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

// An ownership is the row of an ordered tag as one lease of it sees it:
// every reserve is fenced by the lease's token, in the reserve's
// transaction, so that once another server took the lease over it reserves
// nothing, whatever this server's clock says of the lease.

func (w *ownership) reserve(ctx context.Context, step int) (leaf.Reservation, error) {
	g := w.o.g
	r, err := g.ordered.ReserveOwned(ctx, w.o.tag, g.s.Owner, w.token, step)
	if errors.Is(err, leaf.ErrLeaseLost) {
		w.lost(err)
	}
	return r, err
}

// giveBack is on the tag's row: while the lease is held (it is released
// after the give-back), no other owner reserves from it.
func (w *ownership) giveBack(ctx context.Context, from, expect int64) (bool, error) {
	return w.o.g.s.Store.GiveBack(ctx, w.o.tag, from, expect)
}

// admit refuses a range of an ownership that ended (a late load: it is
// never issued, and must not raise the floor the current ownership's ranges
// are admitted by), and one below a range reserved before (see
// ordered.admit).
func (w *ownership) admit(start, end int64) error {
	if w.o.cur.Load() != w {
		return errOwnershipEnded
	}
	return w.o.admit(start, end)
}

func (w *ownership) shell() *buffer { return w.o.shell }
func (*ownership) period() string   { return "" }
