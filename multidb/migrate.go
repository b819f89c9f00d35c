package multidb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/stripe"
)

// Migratable is a Member that Migrate can move: mysql.Store and
// postgres.Store.
type Migratable interface {
	Member
	// Tombstones lists every tombstone: name → max_id.
	Tombstones(ctx context.Context) (map[string]int64, error)
	// RaiseMaxID makes a.Tag's max_id at least a.MaxID, inserting the row
	// (with a's step and description) if it is missing; it never lowers it.
	RaiseMaxID(ctx context.Context, a leaf.Alloc) error
	// RaiseTombstone makes tag's tombstone at least maxID; it never lowers
	// it.
	RaiseTombstone(ctx context.Context, tag string, maxID int64) error
	// LockedAllocs lists every row as Allocs does, read under shared row
	// locks: it waits for the reserves in flight and reads what they
	// committed.
	LockedAllocs(ctx context.Context) ([]leaf.Alloc, error)
}

// fencePrefix marks the cluster of the record a migration writes first on
// every database of the old list: a record no server expects, so that a
// server still running with the old layout (against the instructions) is
// refused at its next reserve (see mysql.Store.ExpectStripe and the
// single-database stores' fence), and one no Open accepts, so that no
// server starts on the databases before the raises are done. It is
// replaced by the new layout's record once they are.
const fencePrefix = "migrating-"

func fenceCluster(cluster string) string { return fencePrefix + cluster }

func isFence(cluster string) bool { return strings.HasPrefix(cluster, fencePrefix) }

// Report says what Migrate did.
type Report struct {
	Cluster   string // the new layout's cluster id
	Block     int64  // its IDs per block
	Databases int    // len(to)
	// Already: an earlier run had finished the migration; nothing changed.
	Already bool
	// Tags lists every tag and deleted tag moved, by name.
	Tags []Moved
}

// Moved is one tag (or deleted tag) as Migrate moved it.
type Moved struct {
	Tag string
	// Bound is the highest ID bound under the old layout: every ID issued
	// under the tag is below it.
	Bound int64
	// Number is what Migrate raised the tag's max_id (or tombstone) to, at
	// least, on every new database: its IDs there are all >= Bound.
	Number int64
	Live   bool // the tag has a row; else it is deleted and has a tombstone
	// Tombstone: it has a tombstone (a live tag may have one too).
	Tombstone bool

	step int    // of the first row found, for the rows Migrate creates
	desc string // likewise
}

// Migrate moves the tags from the layout of the databases from to that of
// to, so that every ID issued after it, for every tag, is above every ID
// issued before it: one database to N (from is a store of one database
// with no stripe record, its numbers being IDs), or N to N+1, or any list
// to a longer one that keeps every database of from (recognised by the
// same Store or the same Name). It is offline: stop every server (Go and
// Java) that issues from these databases first, and start them with the
// new list after it. A Go server left running is stopped from issuing
// rather than allowed to issue IDs twice: Migrate first writes on every
// database of from a record no server expects (a fence), which every
// reserve of this package's stores checks in its transaction, and only
// then reads the bounds, under shared row locks that wait for the
// reserves in flight. A Java Leaf server reads no record: it must be
// stopped.
//
// For each tag and each deleted tag's tombstone it computes M, the highest
// ID bound under the old layout (max over from's databases of
// ID(max_id-1)+1 under the stripe it records), raises the tag's max_id on
// every database of to (creating the row with the tag's step and
// description where it is missing) or its tombstone to
//
//	x = ceil(M / (N·Block)) · Block    (N = len(to))
//
// and then writes the new stripe records (a new cluster id) and checks
// them: the databases only in to first, then those of from, replacing
// their fences. Why x suffices: database i's number y is the ID
// (y/Block)·N·Block + i·Block + y mod Block >= (y/Block)·N·Block. x is a
// multiple of Block, so every y >= x has y/Block >= x/Block =
// ceil(M/(N·Block)), and ID(y) >= ceil(M/(N·Block))·N·Block >= M. A
// database only issues numbers at or above its max_id, and a tag created
// again only above its tombstone, so none issues an ID below M again. x is
// the smallest block-aligned number that is right for database 0.
//
// Raises never lower a row, so a run that failed part-way can be run
// again with the same lists: it recognises the records the failed run
// wrote. Block is opts.Block if set, else the old layout's (DefaultBlock
// for a single database). Tags with a shape (periodic, formatted, opaque),
// live or deleted, are refused: the store serves plain tags only. So are
// ordered tags (rows of leaf_tag_owner, see leaf.OrderedStore), which it
// would serve as plain ones, their order lost: an *OrderedTagsError, before
// anything is written.
func Migrate(ctx context.Context, from, to []Database, opts Config) (Report, error) {
	explicitBlock := opts.Block
	opts = opts.withDefaults()
	if err := checkList(from); err != nil {
		return Report{}, fmt.Errorf("multidb: migrate: from: %w", err)
	}
	if err := checkList(to); err != nil {
		return Report{}, fmt.Errorf("multidb: migrate: to: %w", err)
	}
	if len(to) <= len(from) {
		return Report{}, fmt.Errorf("multidb: migrate: %w: %d databases to %d; a migration adds databases", leaf.ErrInvalidArgument, len(from), len(to))
	}
	if explicitBlock < 0 || explicitBlock > leaf.MaxBlock {
		return Report{}, fmt.Errorf("multidb: migrate: %w: block %d, want 1..%d (or 0: the old layout's)", leaf.ErrInvalidArgument, explicitBlock, leaf.MaxBlock)
	}
	// Every database must be open: connect those given by Connect, for the
	// length of the migration. The old list first: what it holds may refuse
	// the migration before a database only in the new one is touched
	// (opening one creates its tables).
	from, to = slices.Clone(from), slices.Clone(to)
	var opened []Member
	defer func() {
		for _, m := range opened {
			_ = m.Close()
		}
	}()
	connect := func(list []Database) error {
		for i, d := range list {
			if d.Store != nil {
				continue
			}
			m, err := d.Connect(ctx)
			if err != nil {
				return fmt.Errorf("multidb: migrate: connect %s: %w", d.Name, err)
			}
			opened = append(opened, m)
			list[i].Store = m
		}
		return nil
	}
	if err := connect(from); err != nil {
		return Report{}, err
	}
	if err := checkUnordered(ctx, from, opts); err != nil {
		return Report{}, err
	}
	if err := connect(to); err != nil {
		return Report{}, err
	}
	mig := func(d Database) (Migratable, error) {
		m, ok := d.Store.(Migratable)
		if !ok {
			return nil, fmt.Errorf("multidb: migrate: %s: %T cannot be migrated", d.Name, d.Store)
		}
		return m, nil
	}
	// pos[j] is from[j]'s place in to.
	pos := make([]int, len(from))
	for j, f := range from {
		if _, err := mig(f); err != nil {
			return Report{}, err
		}
		pos[j] = slices.IndexFunc(to, func(d Database) bool { return d.Store == f.Store || d.Name == f.Name })
		if pos[j] < 0 {
			return Report{}, fmt.Errorf("multidb: migrate: %w: %s is not in the new list; a migration keeps every database", leaf.ErrInvalidArgument, f.Name)
		}
	}
	shared := make([]int, len(to)) // to[i]'s place in from, or -1
	for i, d := range to {
		if _, err := mig(d); err != nil {
			return Report{}, err
		}
		shared[i] = slices.Index(pos, i)
	}

	fromRecs := readRecords(ctx, from, opts.ReadTimeout)
	toRecs := readRecords(ctx, to, opts.ReadTimeout)
	for _, r := range append(slices.Clone(fromRecs), toRecs...) {
		if r.err != nil {
			return Report{}, fmt.Errorf("multidb: migrate: every database must answer: %w", r.err)
		}
	}
	// A database added by the migration with no record yet must hold
	// nothing: the bounds are collected from the old list only, so rows it
	// holds (a backup of another database, a leftover) would stay below
	// them, and a deleted tag's row could issue its IDs again.
	for i, r := range toRecs {
		if r.ok || slices.Contains(pos, i) {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
		used, err := to[i].Store.Used(rctx)
		cancel()
		if err != nil {
			return Report{}, fmt.Errorf("multidb: migrate: %s: %w", to[i].Name, err)
		}
		if used {
			return Report{}, fmt.Errorf("multidb: migrate: %w: %s, new in the list at place %d, holds tags (or tombstones) and no record;"+
				" a database added by a migration must be empty", leaf.ErrStripeLayout, to[i].Name, i)
		}
	}
	lay, err := layouts(from, to, pos, fromRecs, toRecs, explicitBlock)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Cluster: lay.cluster, Block: lay.block, Databases: len(to)}
	if lay.done {
		if _, err := checkRecords(to, toRecs); err != nil {
			return rep, fmt.Errorf("multidb: migrate: every database of the old list records the new layout, but: %w", err)
		}
		rep.Already = true
		return rep, nil
	}
	if lay.cluster == "" {
		if rep.Cluster, err = NewCluster(); err != nil {
			return rep, err
		}
		lay.cluster = rep.Cluster
	}

	// Planned twice: first to refuse what cannot be migrated (shaped tags,
	// bounds with no room) before anything is written, then for real,
	// after the fences, under lock.
	if _, err := plan(ctx, from, to, lay, opts, false); err != nil {
		return rep, err
	}
	// cur is every database of to's record as it is now.
	cur := slices.Clone(toRecs)
	for j, f := range from {
		i := pos[j]
		if fromRecs[j].ok && !isFence(fromRecs[j].rec.Cluster) && fromRecs[j].rec.Stripe.Databases == len(to) {
			// An earlier run finished the raises and wrote this one's
			// record of the new layout: it serves under the new layout,
			// no server of the old one can reserve from it.
			continue
		}
		fence := leaf.StripeRecord{Stripe: leaf.Stripe{Index: i, Databases: len(to), Block: lay.fenceBlock}, Cluster: fenceCluster(lay.cluster)}
		if err := writeRecord(ctx, f, fromRecs[j], fence, opts); err != nil {
			return rep, fmt.Errorf("multidb: migrate: fence the old layout: %w (run it again with the same lists)", err)
		}
		cur[i] = record{rec: fence, ok: true}
	}

	moves, err := plan(ctx, from, to, lay, opts, true)
	if err != nil {
		return rep, fmt.Errorf("%w (the databases of the old list are fenced: run it again once fixed)", err)
	}
	rep.Tags = moves
	opts.Logger.Info("multidb migrate: raising tags", "tags", len(moves), "databases", len(to), "block", lay.block, "cluster", lay.cluster)
	for _, d := range to {
		m, _ := mig(d)
		for _, mv := range moves {
			rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
			var err error
			if mv.Live {
				err = m.RaiseMaxID(rctx, leaf.Alloc{Tag: mv.Tag, MaxID: mv.Number, Step: mv.step, Description: mv.desc})
			}
			if err == nil && mv.Tombstone {
				err = m.RaiseTombstone(rctx, mv.Tag, mv.Number)
			}
			cancel()
			if err != nil {
				return rep, fmt.Errorf("multidb: migrate: raise %q on %s (the databases of the old list are fenced, no record of the new layout is written yet; run it again): %w", mv.Tag, d.Name, err)
			}
		}
	}

	// The new databases first, then those of the old list: a run that
	// stops in between leaves a fence to read the old layout from, and
	// one that finds every old database moved knows the new ones are.
	order := make([]int, 0, len(to))
	for i := range to {
		if shared[i] < 0 {
			order = append(order, i)
		}
	}
	for i := range to {
		if shared[i] >= 0 {
			order = append(order, i)
		}
	}
	var written []string
	for _, i := range order {
		want := leaf.StripeRecord{Stripe: leaf.Stripe{Index: i, Databases: len(to), Block: lay.block}, Cluster: lay.cluster}
		if err := writeRecord(ctx, to[i], cur[i], want, opts); err != nil {
			return rep, fmt.Errorf("multidb: migrate: %w (records written: %v; run it again with the same lists)", err, written)
		}
		written = append(written, to[i].Name)
	}
	recs := readRecords(ctx, to, opts.ReadTimeout)
	want, err := checkRecords(to, recs)
	if err == nil && want.Cluster != lay.cluster {
		err = fmt.Errorf("cluster %s recorded, %s written", want.Cluster, lay.cluster)
	}
	for _, r := range recs {
		if err == nil && r.err != nil {
			err = r.err
		}
	}
	if err != nil {
		return rep, fmt.Errorf("multidb: migrate: check the new records: %w", err)
	}
	opts.Logger.Info("multidb migrate: done", "tags", len(moves), "databases", len(to), "cluster", lay.cluster)
	return rep, nil
}

// layout is what Migrate reads from the records.
type layout struct {
	old        []leaf.Stripe // from[j]'s stripe under the old layout
	cluster    string        // the new layout's, if an earlier run chose one
	block      int64         // the new layout's
	fenceBlock int64         // the block the fences record
	done       bool          // every database of from already records the new layout
}

// layouts reads the old and new layouts from the records. A database of
// from records the old layout (its place in from, len(from) databases), or
// none when from is one database never spread; or, when an earlier run got
// that far, the fence (its place in to, len(to) databases, the new
// cluster marked by fencePrefix, and from several databases the old
// layout's block, which the bounds need), or the new layout (its place in
// to, len(to) databases). A database only in to records nothing, or the
// new layout.
func layouts(from, to []Database, pos []int, fromRecs, toRecs []record, explicitBlock int64) (layout, error) {
	var (
		lay                      layout
		oldRec, fenceRec, newRec *leaf.StripeRecord
		plain, stale, moved      int
	)
	agree := func(seen **leaf.StripeRecord, r leaf.StripeRecord, name string) error {
		if *seen == nil {
			*seen = &r
			return nil
		}
		if r.Cluster != (*seen).Cluster || r.Stripe.Block != (*seen).Stripe.Block {
			return fmt.Errorf("multidb: migrate: %w: %s records %s, another database of the same layout %s",
				leaf.ErrStripeLayout, name, r, **seen)
		}
		return nil
	}
	for j, r := range fromRecs {
		st := r.rec.Stripe
		var err error
		switch {
		case !r.ok:
			plain++
		case st.Databases == len(from) && st.Index == j && !isFence(r.rec.Cluster):
			stale++
			err = agree(&oldRec, r.rec, from[j].Name)
		case st.Databases == len(to) && st.Index == pos[j] && isFence(r.rec.Cluster):
			err = agree(&fenceRec, r.rec, from[j].Name)
		case st.Databases == len(to) && st.Index == pos[j]:
			moved++
			err = agree(&newRec, r.rec, from[j].Name)
		default:
			return lay, fmt.Errorf("multidb: migrate: %w: %s (place %d in the old list of %d) records that it is %s",
				leaf.ErrStripeLayout, from[j].Name, j, len(from), r.rec)
		}
		if err != nil {
			return lay, err
		}
	}
	if plain > 0 && len(from) > 1 {
		return lay, fmt.Errorf("multidb: migrate: %w: %d of the %d databases of the old list have no stripe record;"+
			" only a single database may have none", leaf.ErrStripeLayout, plain, len(from))
	}
	for i, r := range toRecs {
		st := r.rec.Stripe
		if !r.ok || slices.Contains(pos, i) {
			continue
		}
		if st.Databases != len(to) || st.Index != i || isFence(r.rec.Cluster) {
			return lay, fmt.Errorf("multidb: migrate: %w: %s, new in the list at place %d, records that it is %s;"+
				" a database added by a migration must have no record (or the one an interrupted run of this migration wrote)",
				leaf.ErrStripeLayout, to[i].Name, i, r.rec)
		}
		if err := agree(&newRec, r.rec, to[i].Name); err != nil {
			return lay, err
		}
	}
	if fenceRec != nil {
		c := strings.TrimPrefix(fenceRec.Cluster, fencePrefix)
		if newRec != nil && newRec.Cluster != c {
			return lay, fmt.Errorf("multidb: migrate: %w: a fence of cluster %s and records of cluster %s", leaf.ErrStripeLayout, c, newRec.Cluster)
		}
		if oldRec != nil && len(from) > 1 && fenceRec.Stripe.Block != oldRec.Stripe.Block {
			return lay, fmt.Errorf("multidb: migrate: %w: a fence records blocks of %d, the old layout %d", leaf.ErrStripeLayout, fenceRec.Stripe.Block, oldRec.Stripe.Block)
		}
		lay.cluster = c
	}
	if newRec != nil {
		lay.cluster = newRec.Cluster
	}
	if oldRec != nil && lay.cluster != "" && oldRec.Cluster == lay.cluster {
		return lay, fmt.Errorf("multidb: migrate: %w: old and new records share cluster %s", leaf.ErrStripeLayout, oldRec.Cluster)
	}
	if len(fenceCluster(lay.cluster)) > leaf.MaxClusterLen {
		return lay, fmt.Errorf("multidb: migrate: %w: cluster %s leaves no room for the fence's mark", leaf.ErrStripeLayout, lay.cluster)
	}
	// Every database of from records the new layout: the new ones were
	// written before them.
	lay.done = moved == len(from)
	lay.old = make([]leaf.Stripe, len(from))
	var oldBlock int64
	switch {
	case len(from) == 1 && stale == 0:
		// One database never spread (or fenced, or moved, from one): its
		// numbers are IDs (zero Stripe).
	case oldRec != nil:
		oldBlock = oldRec.Stripe.Block
	case fenceRec != nil:
		oldBlock = fenceRec.Stripe.Block
	case !lay.done:
		return lay, fmt.Errorf("multidb: migrate: %w: the databases of the old list record the new layout, but not all of the new ones do", leaf.ErrStripeLayout)
	}
	if oldBlock > 0 {
		for j := range from {
			lay.old[j] = leaf.Stripe{Index: j, Databases: len(from), Block: oldBlock}
		}
	}
	switch {
	case newRec != nil:
		lay.block = newRec.Stripe.Block
		if explicitBlock > 0 && explicitBlock != lay.block {
			return lay, fmt.Errorf("multidb: migrate: %w: an earlier run recorded blocks of %d, not %d; run it again with the same block",
				leaf.ErrStripeLayout, lay.block, explicitBlock)
		}
	case explicitBlock > 0:
		lay.block = explicitBlock
	case fenceRec != nil:
		// From one database, the fence's block is the new layout's; from
		// several, the old one's, which a run without a block keeps.
		lay.block = fenceRec.Stripe.Block
	case oldRec != nil:
		lay.block = oldRec.Stripe.Block
	default:
		lay.block = DefaultBlock
	}
	// A fence of several databases keeps the old block, which the bounds
	// of a run that stops after it need; one of a single database, whose
	// numbers are IDs, records the new one.
	lay.fenceBlock = lay.block
	if len(from) > 1 && oldBlock > 0 {
		lay.fenceBlock = oldBlock
	}
	return lay, nil
}

// plan collects the tags and tombstones of from (under lock if locked)
// and the number each is raised to on the databases of to.
func plan(ctx context.Context, from, to []Database, lay layout, opts Config, locked bool) ([]Moved, error) {
	moves, err := collect(ctx, from, lay.old, opts, locked)
	if err != nil {
		return nil, err
	}
	n := int64(len(to))
	for i := range moves {
		mv := &moves[i]
		round := n * lay.block
		k := mv.Bound / round
		if mv.Bound%round != 0 {
			k++
		}
		mv.Number = max(k*lay.block, 1)
		for d := range to {
			st := leaf.Stripe{Index: d, Databases: len(to), Block: lay.block}
			if mv.Number-1 > stripe.MaxNumber(st) {
				return nil, fmt.Errorf("multidb: migrate: %q: %w: bound %d has no room on %s under the new layout", mv.Tag, leaf.ErrInvalidArgument, mv.Bound, to[d].Name)
			}
		}
	}
	return moves, nil
}

// collect lists every tag and tombstone of from with its bound under the
// old layout, refusing shaped tags and periods. locked reads the rows
// under shared locks (Migratable.LockedAllocs).
func collect(ctx context.Context, from []Database, old []leaf.Stripe, opts Config, locked bool) ([]Moved, error) {
	byTag := map[string]*Moved{}
	get := func(tag string) *Moved {
		mv, ok := byTag[tag]
		if !ok {
			mv = &Moved{Tag: tag}
			byTag[tag] = mv
		}
		return mv
	}
	for j, d := range from {
		m := d.Store.(Migratable)
		rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
		list := m.Allocs
		if locked {
			list = m.LockedAllocs
		}
		rows, err := list(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("multidb: migrate: list tags of %s: %w", d.Name, err)
		}
		rctx, cancel = context.WithTimeout(ctx, opts.ReadTimeout)
		tombs, err := m.Tombstones(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("multidb: migrate: list tombstones of %s: %w", d.Name, err)
		}
		names := make([]string, 0, len(rows)+len(tombs))
		for _, r := range rows {
			mv := get(r.Tag)
			if !mv.Live {
				mv.Live, mv.step, mv.desc = true, r.Step, r.Description
			}
			mv.Bound = max(mv.Bound, bound(old[j], r.MaxID))
			names = append(names, r.Tag)
		}
		for name, maxID := range tombs {
			if strings.ContainsRune(name, leaf.PeriodSep) {
				return nil, fmt.Errorf("multidb: migrate: %w: %s has the tombstone of a period, %q: periodic tags cannot be spread over several databases",
					leaf.ErrInvalidArgument, d.Name, name)
			}
			mv := get(name)
			mv.Tombstone = true
			mv.Bound = max(mv.Bound, bound(old[j], maxID))
			names = append(names, name)
		}
		if err := checkPlain(ctx, d, names, opts); err != nil {
			return nil, err
		}
	}
	out := make([]Moved, 0, len(byTag))
	for _, mv := range byTag {
		if mv.Live {
			if err := leaf.ValidateAlloc(leaf.Alloc{Tag: mv.Tag, Step: mv.step, Description: mv.desc}); err != nil {
				return nil, fmt.Errorf("multidb: migrate: tag %q: %w", mv.Tag, err)
			}
		}
		out = append(out, *mv)
	}
	slices.SortFunc(out, func(a, b Moved) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// checkPlain refuses a tag with a shape among names, where d keeps shapes
// (leaf.TagShaper): a shape outlives its tag, so deleted tags count too.
func checkPlain(ctx context.Context, d Database, names []string, opts Config) error {
	if lister, ok := d.Store.(leaf.ShapeLister); ok {
		// A few queries per thousands of tags, not one per tag.
		for chunk := range slices.Chunk(names, shapesChunk) {
			rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
			shapes, err := lister.TagShapes(rctx, chunk)
			cancel()
			if err != nil {
				return fmt.Errorf("multidb: migrate: read the shapes of %d tags on %s: %w", len(chunk), d.Name, err)
			}
			for _, tag := range chunk {
				if sh, ok := shapes[tag]; ok && !sh.IsPlain() {
					return shapeRefusal(tag, d.Name, sh)
				}
			}
		}
		return nil
	}
	shaper, ok := d.Store.(leaf.TagShaper)
	if !ok {
		return nil
	}
	for _, tag := range names {
		rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
		sh, err := shaper.TagShape(rctx, tag)
		cancel()
		if err != nil {
			return fmt.Errorf("multidb: migrate: read the shape of %q on %s: %w", tag, d.Name, err)
		}
		if !sh.IsPlain() {
			return shapeRefusal(tag, d.Name, sh)
		}
	}
	return nil
}

// shapesChunk is how many tags one TagShapes call of checkPlain names,
// each call within ReadTimeout.
const shapesChunk = 5000

func shapeRefusal(tag, db string, sh leaf.TagShape) error {
	return fmt.Errorf("multidb: migrate: %w: tag %q on %s has a shape (%s); a store over several databases serves plain tags only",
		leaf.ErrInvalidArgument, tag, db, sh)
}

// orderedLister lists the ordered tags of a database
// (leaf.OrderedStore.OrderedTags): the SQL stores.
type orderedLister interface {
	OrderedTags(ctx context.Context, after string, limit int) ([]leaf.TagLease, error)
}

// MaxListedOrdered is how many ordered tags an OrderedTagsError names; it
// counts the rest.
const MaxListedOrdered = 10

// orderedPage is how many ordered tags one OrderedTags call of
// checkUnordered reads, each call within ReadTimeout.
const orderedPage = 1000

// OrderedTagsError is Migrate's refusal of databases holding ordered tags:
// a store spread over several databases serves every tag as a plain one,
// so the tags would go on issuing IDs that no longer increase in the order
// they are issued, without an error. Make them plain first (or keep the
// store on one database). It matches leaf.ErrInvalidArgument and
// leaf.ErrOrderedTag.
type OrderedTagsError struct {
	// Databases names the databases of the old list holding ordered tags.
	Databases []string
	// Tags are the first of them, at most MaxListedOrdered: in the order
	// of Databases, each database's in name order.
	Tags []string
	// Count is how many there are in all.
	Count int
}

func (e *OrderedTagsError) Error() string {
	quoted := make([]string, len(e.Tags))
	for i, t := range e.Tags {
		quoted[i] = strconv.Quote(t)
	}
	list := strings.Join(quoted, ", ")
	if more := e.Count - len(e.Tags); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("multidb: migrate: %v: %s on %s: %s; a store over several databases serves every tag as a plain one,"+
		" so %s would no longer issue IDs that increase in the order they are issued: make %s plain first, or keep the store on one database",
		leaf.ErrInvalidArgument, plural(e.Count, "ordered tag"), strings.Join(e.Databases, ", "), list,
		pick(e.Count, "it", "they"), pick(e.Count, "it", "them"))
}

func (e *OrderedTagsError) Unwrap() []error {
	return []error{leaf.ErrInvalidArgument, leaf.ErrOrderedTag}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkUnordered refuses databases holding ordered tags with an
// *OrderedTagsError: every row of leaf_tag_owner counts, one left by hand
// without its tag too. It reads the rows a page at a time, naming the
// first MaxListedOrdered and counting the rest.
func checkUnordered(ctx context.Context, from []Database, opts Config) error {
	var refusal OrderedTagsError
	for _, d := range from {
		lister, ok := d.Store.(orderedLister)
		if !ok {
			continue
		}
		n := 0
		for after := ""; ; {
			rctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
			page, err := lister.OrderedTags(rctx, after, orderedPage)
			cancel()
			if err != nil {
				return fmt.Errorf("multidb: migrate: list the ordered tags of %s: %w", d.Name, err)
			}
			for _, l := range page {
				if len(refusal.Tags) < MaxListedOrdered {
					refusal.Tags = append(refusal.Tags, l.Tag)
				}
			}
			n += len(page)
			if len(page) < orderedPage {
				break
			}
			after = page[len(page)-1].Tag
		}
		if n > 0 {
			refusal.Databases = append(refusal.Databases, d.Name)
			refusal.Count += n
		}
	}
	if refusal.Count > 0 {
		return &refusal
	}
	return nil
}

// writeRecord gives database d the record want: it writes it where there
// is none, replaces the old layout's (compare and set), and leaves one
// that already is want.
func writeRecord(ctx context.Context, d Database, had record, want leaf.StripeRecord, opts Config) error {
	wctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
	defer cancel()
	var err error
	switch {
	case had.ok && had.rec.Same(want):
		return nil
	case had.ok:
		_, err = d.Store.ReplaceStripe(wctx, had.rec, want)
	default:
		_, err = d.Store.WriteStripe(wctx, want)
	}
	if err != nil {
		return fmt.Errorf("write the stripe record of %s: %w", d.Name, err)
	}
	// Whether or not this call changed it, the record must now be want.
	rec, ok, err := d.Store.ReadStripe(wctx)
	if err != nil {
		return fmt.Errorf("read back the stripe record of %s: %w", d.Name, err)
	}
	if !ok || !rec.Same(want) {
		return errors.New(mismatch(d.Name, want.Stripe.Index, rec, want).Error() + " (changed by someone else during the migration?)")
	}
	return nil
}
