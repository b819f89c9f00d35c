package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// notPeriod leaves the rows of periods out of a listing: their names, and
// only theirs, hold leaf.PeriodSep. It is a literal, with no placeholder.
const notPeriod = "biz_tag NOT LIKE '%" + string(leaf.PeriodSep) + "%'"

// periodMatch is the condition that selects a tag's period rows; its two
// arguments are periodArgs'. The lower bound lets the database start its
// index range at the tag even where it cannot derive one from LIKE (see
// pageQuery). The match is exact where LIKE or GLOB is case-sensitive
// (SQLite's GLOB, PostgreSQL); under MySQL's case-insensitive collations it
// also matches another case's rows, which cannot exist: biz_tag is unique
// in the same collation, so two tags differing in case cannot both exist.
func periodMatch(d Dialect) string {
	if d.PrefixGlob {
		return "biz_tag >= ? AND biz_tag GLOB ?"
	}
	return "biz_tag >= ? AND biz_tag LIKE ? ESCAPE '!'"
}

// periodArgs are periodMatch's arguments for tag. The tag alphabet holds
// none of GLOB's wildcards and of LIKE's only _, escaped as in pageQuery.
func (s *Store) periodArgs(tag string) []any {
	prefix := tag + string(leaf.PeriodSep)
	if s.d.PrefixGlob {
		return []any{prefix, prefix + "*"}
	}
	return []any{prefix, strings.ReplaceAll(prefix, "_", "!_") + "%"}
}

func (s *Store) rebind(q string) string {
	if s.d.Dollar {
		return Rebind(q)
	}
	return q
}

func checkPeriod(tag, key string) error {
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	return tagshape.ValidatePeriodKey(key)
}

// ReservePeriod reserves from the row of tag's period key. A missing row is
// made first (ensurePeriod), and the reserve runs again: a row pruned
// between the two is made again, at its tombstone.
func (s *Store) ReservePeriod(ctx context.Context, tag, key string, step int) (leaf.Reservation, error) {
	if err := checkPeriod(tag, key); err != nil {
		return leaf.Reservation{}, err
	}
	op := fmt.Sprintf("reserve %q period %s", tag, key)
	if err := s.checkOpen(op); err != nil {
		return leaf.Reservation{}, err
	}
	name := tagshape.PeriodRow(tag, key)
	var r leaf.Reservation
	err := s.retry(ctx, func() error {
		for range 3 {
			var err error
			if r, err = s.reserveOnce(ctx, name, step, nil); !errors.Is(err, leaf.ErrTagNotFound) {
				return err
			}
			if err = s.ensurePeriod(ctx, tag, name); err != nil {
				return err
			}
		}
		return fmt.Errorf("the period's row was deleted each time it was made (pruned, or the tag deleted): %w", leaf.ErrNotReady)
	})
	if err != nil {
		return leaf.Reservation{}, s.wrap(op, err)
	}
	return r, nil
}

// ensurePeriod makes the row name of tag's period unless it exists, in one
// transaction: the tag's row is read under a shared lock, so that a
// DeleteTag of the tag waits for the new row and deletes it too; the insert
// does nothing if another server's insert won; the tombstone is read after
// the insert, which waits for a prune of the row under way, and a row
// below it is raised to it (every row is at or above its tombstone from
// its making on, so raising one another server made changes nothing).
func (s *Store) ensurePeriod(ctx context.Context, tag, name string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var start, step int64
		err := tx.QueryRowContext(ctx, s.q.parentShared, tag).Scan(&start, &step)
		if errors.Is(err, sql.ErrNoRows) {
			return leaf.ErrTagNotFound
		}
		if err != nil {
			return fmt.Errorf("read the tag's row: %w", err)
		}
		start = max(start, 1)
		if _, err = tx.ExecContext(ctx, s.q.addPeriod, name, start, step); err != nil {
			return fmt.Errorf("add the period's row: %w", err)
		}
		var tomb int64
		err = tx.QueryRowContext(ctx, s.q.tombstone, name).Scan(&tomb)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			err = nil
		case err != nil:
			return fmt.Errorf("read tombstone: %w", err)
		case tomb > start:
			if _, err = tx.ExecContext(ctx, s.q.raiseStart, tomb, name, tomb); err != nil {
				return fmt.Errorf("start above tombstone: %w", err)
			}
		}
		return nil
	})
}

// GiveBackPeriod is GiveBack on the row of tag's period key.
func (s *Store) GiveBackPeriod(ctx context.Context, tag, key string, from, expect int64) (bool, error) {
	if err := checkPeriod(tag, key); err != nil {
		return false, err
	}
	if from < 1 || from > expect {
		return false, fmt.Errorf("%w: give back %q period %s from %d at max_id %d: want 1 <= from <= max_id", leaf.ErrInvalidArgument, tag, key, from, expect)
	}
	return s.giveBackRow(ctx, fmt.Sprintf("give back %q period %s", tag, key), tagshape.PeriodRow(tag, key), from, expect)
}

// periodCols are the columns a period listing reads.
const periodCols = "SELECT biz_tag, max_id, step, update_time FROM leaf_alloc WHERE "

// queryer is what a period listing runs on: the pool or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// periodRows lists tag's period rows with keys below before ("" for no
// bound), at most limit (0: all), newest first if desc, locked for
// update if lock.
func (s *Store) periodRows(ctx context.Context, q queryer, tag, before string, limit int, desc, lock bool) ([]leaf.PeriodAlloc, error) {
	var b strings.Builder
	b.WriteString(periodCols)
	b.WriteString(periodMatch(s.d))
	args := s.periodArgs(tag)
	if before != "" {
		b.WriteString(" AND biz_tag < ?")
		args = append(args, tagshape.PeriodRow(tag, before))
	}
	b.WriteString(" ORDER BY biz_tag")
	if desc {
		b.WriteString(" DESC")
	}
	if limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, limit)
	}
	if lock && s.d.LockingReads {
		b.WriteString(" FOR UPDATE")
	}
	rows, err := q.QueryContext(ctx, s.rebind(b.String()), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	prefix := tag + string(leaf.PeriodSep)
	out := []leaf.PeriodAlloc{}
	for rows.Next() {
		var (
			name string
			p    leaf.PeriodAlloc
			step int64
			at   dbTime
		)
		if err := rows.Scan(&name, &p.MaxID, &step, &at); err != nil {
			return nil, err
		}
		key, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue // another case's row under a case-insensitive collation
		}
		p.Key, p.Step, p.UpdateTime = key, int(step), at.t
		out = append(out, p)
	}
	return out, rows.Err()
}

// Periods lists at most limit of tag's period rows with keys below before
// ("": all), newest first.
func (s *Store) Periods(ctx context.Context, tag, before string, limit int) ([]leaf.PeriodAlloc, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return nil, err
	}
	if before != "" {
		if err := tagshape.ValidatePeriodKey(before); err != nil {
			return nil, err
		}
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d, want >= 1", leaf.ErrInvalidArgument, limit)
	}
	op := fmt.Sprintf("list periods of %q", tag)
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	out, err := s.periodRows(ctx, s.db, tag, before, limit, true, false)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

// CountPeriods counts tag's period rows.
func (s *Store) CountPeriods(ctx context.Context, tag string) (int, error) {
	if err := leaf.ValidateTag(tag); err != nil {
		return 0, err
	}
	op := fmt.Sprintf("count periods of %q", tag)
	if err := s.checkOpen(op); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.QueryRowContext(ctx, s.rebind("SELECT COUNT(*) FROM leaf_alloc WHERE "+periodMatch(s.d)), s.periodArgs(tag)...).Scan(&n)
	if err != nil {
		return 0, s.wrap(op, err)
	}
	return int(n), nil
}

// pruneBatch is how many period rows one transaction of PrunePeriods
// deletes.
const pruneBatch = 500

// PrunePeriods deletes tag's period rows with keys below before, keeping
// their tombstones, pruneBatch rows per transaction, and returns them
// oldest first.
func (s *Store) PrunePeriods(ctx context.Context, tag, before string) ([]leaf.PeriodAlloc, error) {
	if err := checkPeriod(tag, before); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("prune periods of %q", tag)
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	out := []leaf.PeriodAlloc{}
	for {
		var batch []leaf.PeriodAlloc
		err := s.retry(ctx, func() error {
			var err error
			batch, err = s.pruneOnce(ctx, tag, before)
			return err
		})
		if err != nil {
			return out, s.wrap(op, err)
		}
		out = append(out, batch...)
		if len(batch) < pruneBatch {
			return out, nil
		}
	}
}

func (s *Store) pruneOnce(ctx context.Context, tag, before string) ([]leaf.PeriodAlloc, error) {
	var batch []leaf.PeriodAlloc
	err := s.inTx(ctx, func(tx *sql.Tx) (err error) {
		batch, err = s.buryPeriods(ctx, tx, tag, before, pruneBatch)
		return err
	})
	if err != nil {
		return nil, err
	}
	return batch, nil
}

// buryPeriods deletes in tx up to limit (0: all) of tag's oldest period rows
// with keys below before ("": all), recording each one's tombstone, and
// returns them. The rows are read under the locks of FOR UPDATE (or
// SQLite's database lock), so no reserve moves max_id between the read and
// the tombstone.
func (s *Store) buryPeriods(ctx context.Context, tx *sql.Tx, tag, before string, limit int) ([]leaf.PeriodAlloc, error) {
	rows, err := s.periodRows(ctx, tx, tag, before, limit, false, true)
	if err != nil {
		return nil, fmt.Errorf("read period rows: %w", err)
	}
	for _, p := range rows {
		name := tagshape.PeriodRow(tag, p.Key)
		if _, err := tx.ExecContext(ctx, s.q.remove, name); err != nil {
			return nil, fmt.Errorf("delete period %s: %w", p.Key, err)
		}
		args := []any{name, p.MaxID}
		if s.d.OnDuplicateKey {
			args = append(args, p.MaxID)
		}
		if _, err := tx.ExecContext(ctx, s.q.bury, args...); err != nil {
			return nil, fmt.Errorf("record tombstone of period %s: %w", p.Key, err)
		}
	}
	return rows, nil
}

// tagsBatch is how many tags one statement of a read by tags names.
const tagsBatch = 500

// byTags runs query, whose last condition is "biz_tag IN (" or "tag IN
// (", for tags in statements of at most tagsBatch tags, each as op; read
// takes each statement's rows. The tags are validated first.
func (s *Store) byTags(ctx context.Context, op, query string, tags []string, read func(*sql.Rows) error) error {
	for _, t := range tags {
		if err := leaf.ValidateTag(t); err != nil {
			return err
		}
	}
	if err := s.checkOpen(op); err != nil {
		return err
	}
	for len(tags) > 0 {
		batch := tags[:min(len(tags), tagsBatch)]
		tags = tags[len(batch):]
		args := make([]any, len(batch))
		for i, t := range batch {
			args[i] = t
		}
		if err := s.readRows(ctx, s.rebind(query+placeholders(len(batch))+")"), args, read); err != nil {
			return s.wrap(op, err)
		}
	}
	return nil
}

func (s *Store) readRows(ctx context.Context, q string, args []any, read func(*sql.Rows) error) error {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := read(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// TagShapes reads the shapes of tags, a page of a listing at a time: the
// tags with a shape row, a few queries for any number of tags. Plain tags
// are not in the map.
func (s *Store) TagShapes(ctx context.Context, tags []string) (map[string]leaf.TagShape, error) {
	out := map[string]leaf.TagShape{}
	err := s.byTags(ctx, "read tag shapes",
		"SELECT biz_tag, period, time_zone, fmt_prefix, fmt_width, fmt_radix, opaque_bits, key_check FROM leaf_tag_shape WHERE biz_tag IN (",
		tags, func(rows *sql.Rows) error {
			var (
				tag, period      string
				sh               leaf.TagShape
				width, radix, ob int64
			)
			if err := rows.Scan(&tag, &period, &sh.TimeZone, &sh.Format.Prefix, &width, &radix, &ob, &sh.KeyCheck); err != nil {
				return err
			}
			sh.Period, sh.Format.Width, sh.Format.Radix, sh.OpaqueBits = leaf.Period(period), int(width), int(radix), int(ob)
			out[tag] = sh
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}
