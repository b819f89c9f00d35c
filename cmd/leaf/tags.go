package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/tagpage"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/tagshape"
)

const tagsUsage = `Usage:
  leaf tags list [--json] [--prefix P]
  leaf tags get TAG [--json]
  leaf tags create TAG [--step N] [--start N] [--description S]
                   [--period day|month|year] [--tz ZONE] [--format SPEC] [--opaque-bits N] [--ordered]
  leaf tags set-step TAG N
  leaf tags order TAG on|off
  leaf tags delete TAG
  leaf tags prune TAG (--keep N | --before PERIOD)

Manages the rows of leaf_alloc directly in the store named by the same
configuration as 'leaf serve' (--config, --data-dir, --segment-store,
--segment-dsn, LEAF_* variables). A running server sees a new tag on its
first request for it, and every change within segment.refresh_interval.
A tag name is 1-128 bytes of A-Z a-z 0-9 . _ : -

A deleted tag leaves a tombstone: created again without --start it
continues above every ID it issued before; a --start below that is refused.

A periodic tag (--period) restarts at its start value every day, month or
year of its time zone (--tz, default UTC): each period is a row of its own
(TAG#20261124), made by the first server that needs it, and its name may
have at most 119 bytes. prune removes its old periods, never the current
one nor the one before, leaving tombstones so that no period starts again.
A tag's period, time zone, format and opaque bits are its shape, fixed
when it is created: a deleted tag can be created again only with the same.

An ordered tag (--ordered, or 'order TAG on') has IDs that strictly
increase in the order they are issued across the cluster: one server at a
time, its owner, issues them, and the others pass requests on (see
docs/ordered-tags.md). 'order TAG off' makes it a plain tag again.

list, set-step and delete never create the store: with the embedded SQLite
store, a file that is not there (a mistyped --data-dir) is an error naming
it. create makes a new store when there is none, and says so on stderr.
`

// storeKeys are the configuration keys that name the store.
var storeKeys = []string{"data_dir", "segment.store", "segment.dsn"}

func (a *app) tags(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErrorf("tags needs a subcommand: list, get, create, set-step, order, delete or prune")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list":
		return a.tagsList(ctx, rest)
	case "get":
		return a.tagsGet(ctx, rest)
	case "prune":
		return a.tagsPrune(ctx, rest)
	case "create":
		return a.tagsCreate(ctx, rest)
	case "set-step":
		return a.tagsSetStep(ctx, rest)
	case "order":
		return a.tagsOrder(ctx, rest)
	case "delete":
		return a.tagsDelete(ctx, rest)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, tagsUsage)
		return errHelp
	}
	return usageErrorf("unknown tags subcommand %q; want list, get, create, set-step, order, delete or prune", sub)
}

// withStore loads the configuration, opens the store, runs f and closes the
// store again. Only create may make a new embedded store, and says so on
// stderr: a tag created in a mistyped --data-dir is one no server sees.
func (a *app) withStore(ctx context.Context, flags *config.Flags, create storeCreate, f func(segmentStore) error) error {
	return a.withStoreConfig(ctx, flags, create, func(s segmentStore, _ config.Config) error { return f(s) })
}

// withStoreConfig is withStore that also hands f the configuration, for
// the opaque key.
func (a *app) withStoreConfig(ctx context.Context, flags *config.Flags, create storeCreate, f func(segmentStore, config.Config) error) error {
	cfg, err := config.Load(flags.Sources(a.env))
	if err != nil {
		return err
	}
	isNew := cfg.Segment.Store == config.StoreSQLite && !fileExists(cfg.SQLitePath())
	// A store over several databases warns of one that does not answer.
	s, _, err := openStore(ctx, cfg, create, newLogger(config.Log{Level: "warn", Format: cfg.Log.Format}, a.stderr))
	if err != nil {
		return err
	}
	if isNew {
		fmt.Fprintf(a.stderr, "leaf tags create: created a new SQLite store at %s\n", cfg.SQLitePath())
	}
	ferr := f(s, cfg)
	if cerr := s.Close(); cerr != nil && ferr == nil {
		return fmt.Errorf("close segment store: %w", cerr)
	}
	return ferr
}

// tagFlagSet is the FlagSet of one tags subcommand with the store flags bound.
func tagFlagSet(name string) (*flag.FlagSet, *config.Flags) {
	fs := newFlagSet("tags " + name)
	return fs, config.BindFlags(fs, storeKeys...)
}

// wantArgs checks the number of positional arguments against their names.
func wantArgs(got []string, names ...string) error {
	if len(got) < len(names) {
		return usageErrorf("missing %s", strings.Join(names[len(got):], " "))
	}
	if len(got) > len(names) {
		return usageErrorf("unexpected argument %q", got[len(names)])
	}
	return nil
}

// tagArg is the one positional argument of a command on a tag, checked
// before any store is opened.
func tagArg(pos []string) (string, error) {
	if err := wantArgs(pos, "TAG"); err != nil {
		return "", err
	}
	if err := leaf.ValidateTag(pos[0]); err != nil {
		return "", err
	}
	return pos[0], nil
}

// listPage is how many rows tags list reads at a time.
const listPage = 1000

func (a *app) tagsList(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("list")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	prefix := fs.String("prefix", "", "list only the tags that begin with this")
	pos, err := a.parseFlags(fs, "Usage: leaf tags list [--json] [--prefix P] [flags]\n\n"+
		"Lists the tags in the store, in its order of biz_tag, reading "+strconv.Itoa(listPage)+" rows at a time.\n", args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos); err != nil {
		return err
	}
	if err := tagpage.CheckPrefix(*prefix); err != nil {
		return err
	}
	return a.withStore(ctx, flags, mustExist, func(s segmentStore) error {
		var out rowWriter = &tableWriter{w: a.stdout}
		if *asJSON {
			out = &jsonArrayWriter{w: a.stdout}
		}
		err := eachPage(ctx, s, *prefix, func(page []leaf.Alloc) error {
			tags := make([]string, len(page))
			for i, al := range page {
				tags[i] = al.Tag
			}
			shapes, err := s.TagShapes(ctx, tags)
			if err != nil {
				return err
			}
			rows := make([]httpapi.TagRow, len(page))
			for i, al := range page {
				rows[i] = httpapi.NewTagRow(al, shapes[al.Tag])
			}
			if err := httpapi.MarkOrdered(ctx, orderedStore(s), rows); err != nil {
				return err
			}
			return out.rows(rows)
		})
		if err != nil {
			return fmt.Errorf("list tags: %w", err)
		}
		return out.end()
	})
}

// eachPage calls f with the store's rows that begin with prefix, a page at
// a time, so that a table of a million tags is never held in memory whole.
func eachPage(ctx context.Context, p leaf.AllocPager, prefix string, f func([]leaf.Alloc) error) error {
	after := ""
	for {
		page, err := p.AllocsPage(ctx, prefix, after, listPage)
		if err != nil {
			return err
		}
		if err := f(page); err != nil {
			return err
		}
		if len(page) < listPage {
			return nil
		}
		after = page[len(page)-1].Tag
	}
}

// rowWriter prints rows, with their tags' shapes, as they come, then ends
// the listing.
type rowWriter interface {
	rows([]httpapi.TagRow) error
	end() error
}

// jsonArrayWriter prints one JSON array, element by element, as
// json.Encoder with a two-space indent prints the whole array.
type jsonArrayWriter struct {
	w io.Writer
	n int
}

// shapeCell is a shape in one table cell without spaces: "-" for a plain
// tag, else its settings as key=value, comma-separated, and "ordered" for
// an ordered tag.
func shapeCell(r httpapi.TagRow) string {
	var parts []string
	if r.Ordered {
		parts = append(parts, "ordered")
	}
	for _, kv := range [][2]string{{"period", r.Period}, {"tz", r.TimeZone}, {"format", r.Format}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if r.OpaqueBits != 0 {
		parts = append(parts, "opaque_bits="+strconv.Itoa(r.OpaqueBits))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func (j *jsonArrayWriter) rows(page []httpapi.TagRow) error {
	var b bytes.Buffer
	for _, row := range page {
		el, err := json.MarshalIndent(row, "  ", "  ")
		if err != nil {
			return err
		}
		if j.n == 0 {
			b.WriteString("[\n  ")
		} else {
			b.WriteString(",\n  ")
		}
		b.Write(el)
		j.n++
	}
	_, err := j.w.Write(b.Bytes())
	return err
}

func (j *jsonArrayWriter) end() error {
	end := "\n]\n"
	if j.n == 0 {
		end = "[]\n" // "[]", not "null", for scripts
	}
	_, err := io.WriteString(j.w, end)
	return err
}

// tableWriter prints the rows as a table with a header, in columns two
// spaces apart. Columns are as wide as their widest cell so far: a page
// cannot widen the rows already printed, so a later, wider page shifts the
// columns from there on.
type tableWriter struct {
	w      io.Writer
	widths []int
	header bool
}

var tableHeader = []string{"TAG", "MAX_ID", "STEP", "UPDATE_TIME", "SHAPE", "DESCRIPTION"}

func (t *tableWriter) rows(page []httpapi.TagRow) error {
	cells := make([][]string, 0, len(page)+1)
	if !t.header {
		t.header = true
		cells = append(cells, tableHeader)
		t.widths = make([]int, len(tableHeader)-1) // the last cell is not padded
	}
	for _, r := range page {
		updated := "-"
		if !r.UpdateTime.IsZero() {
			updated = r.UpdateTime.Format(time.RFC3339)
		}
		cells = append(cells, []string{r.Tag, strconv.FormatInt(r.MaxID, 10), strconv.Itoa(r.Step), updated,
			shapeCell(r), printable(r.Description)})
	}
	for _, row := range cells {
		for i := range t.widths {
			t.widths[i] = max(t.widths[i], len(row[i]))
		}
	}
	var b bytes.Buffer
	for _, row := range cells {
		for i, c := range row[:len(t.widths)] {
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", t.widths[i]-len(c)+2))
		}
		b.WriteString(row[len(t.widths)])
		b.WriteByte('\n')
	}
	_, err := t.w.Write(b.Bytes())
	return err
}

func (t *tableWriter) end() error {
	return t.rows(nil) // the header of an empty table
}

// printable keeps a description from breaking the table: control characters
// (tabs, newlines) are shown escaped.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func (a *app) tagsCreate(ctx context.Context, args []string) error {
	fs := newFlagSet("tags create")
	// The opaque key is read as serve reads it (segment.opaque_key,
	// LEAF_SEGMENT_OPAQUE_KEY or this file), never from a flag's value.
	flags := config.BindFlags(fs, append(slices.Clone(storeKeys), "segment.opaque_key_file")...)
	step := fs.Int("step", 1000, "IDs reserved per segment, 1..1000000 (the adaptive step never goes below it)")
	start := fs.Int64("start", 0, "the first ID to issue, >= 1 (default: 1, or above every ID issued under a deleted tag of the same name)")
	desc := fs.String("description", "", "free text, at most 256 bytes")
	period := fs.String("period", "", "day, month or year: the tag restarts at its start value each period (its name then has at most 119 bytes)")
	tz := fs.String("tz", "", "the IANA time zone whose calendar the periods follow (default UTC); with --period only")
	format := fs.String("format", "", "the format of the tag's IDs, e.g. 'ORD-{period}-{seq:6}' or 'INV{seq:8:36}': a prefix, {period}- for a periodic tag, then {seq}, {seq:WIDTH} or {seq:WIDTH:RADIX}")
	opaque := fs.Int("opaque-bits", 0, "16..63: pass the tag's IDs through a keyed permutation of that many bits (0: plain)")
	ordered := fs.Bool("ordered", false, "make the tag ordered: its IDs strictly increase in the order they are issued, across the cluster (see 'leaf tags order')")
	pos, err := a.parseFlags(fs, "Usage: leaf tags create TAG [--step N] [--start N] [--description S]\n"+
		"                        [--period day|month|year] [--tz ZONE] [--format SPEC] [--opaque-bits N] [--ordered] [flags]\n\n"+
		"Creates a tag in the store. --period, --tz, --format and --opaque-bits are its shape, fixed from then on.\n", args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, "TAG"); err != nil {
		return err
	}
	// Without --start, MaxID 0 lets the store choose: 1, or the tombstone
	// of a deleted tag of the same name.
	alloc := leaf.Alloc{Tag: pos[0], MaxID: *start, Step: *step, Description: *desc}
	// Check before touching the store: bad input is a usage error (exit 2)
	// even when the store is unreachable.
	if err := leaf.ValidateTag(alloc.Tag); err != nil {
		return err
	}
	if err := checkStep(alloc.Step); err != nil {
		return err
	}
	if err := leaf.ValidateAlloc(alloc); err != nil {
		return err
	}
	if isSet(fs, "start") && *start == 0 {
		return fmt.Errorf("%w: start 0, want >= 1, or no --start to continue above any IDs of a deleted tag of the same name", leaf.ErrInvalidArgument)
	}
	shape, err := parseShape(alloc.Tag, *period, *tz, *format, *opaque)
	if err != nil {
		return err
	}
	return a.withStoreConfig(ctx, flags, mayCreate, func(s segmentStore, cfg config.Config) error {
		if shape.OpaqueBits != 0 {
			key, err := cfg.OpaqueKey()
			if err != nil {
				return err
			}
			if shape, err = segment.PrepareShape(shape, key); err != nil {
				return err
			}
		}
		var ordStore leaf.OrderedStore
		if *ordered {
			if ordStore = orderedStore(s); ordStore == nil {
				return fmt.Errorf("%w: --ordered: the %s store keeps no ordered tags", leaf.ErrInvalidArgument, cfg.Segment.Store)
			}
		}
		if err := s.CreateShapedTag(ctx, alloc, shape); err != nil {
			return fmt.Errorf("create tag %s: %w", alloc.Tag, err)
		}
		if ordStore != nil {
			if err := ordStore.SetOrdered(ctx, alloc.Tag, true); err != nil {
				return fmt.Errorf("tag %s created, but not made ordered (run 'leaf tags order %s on'): %w", alloc.Tag, alloc.Tag, err)
			}
			defer fmt.Fprintf(a.stdout, "ordered: IDs strictly increase in the order they are issued\n")
		}
		if !shape.IsPlain() {
			defer fmt.Fprintf(a.stdout, "shape: %s\n", strings.ReplaceAll(shapeCell(httpapi.NewTagRow(leaf.Alloc{}, shape.Canonical())), ",", ", "))
		}
		if alloc.MaxID == 0 {
			row, err := s.Alloc(ctx, alloc.Tag)
			if err != nil {
				// The tag exists: failing now would only make a retry
				// meet "tag already exists".
				fmt.Fprintf(a.stdout, "created tag %s: step %d\n", alloc.Tag, alloc.Step)
				fmt.Fprintf(a.stderr, "leaf tags create: reading the first ID back failed: %v\n", err)
				return nil
			}
			alloc.MaxID = row.MaxID
		}
		fmt.Fprintf(a.stdout, "created tag %s: step %d, first ID %d\n", alloc.Tag, alloc.Step, alloc.MaxID)
		return nil
	})
}

func (a *app) tagsSetStep(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("set-step")
	pos, err := a.parseFlags(fs, "Usage: leaf tags set-step TAG N [flags]\n\nChanges a tag's stored step (1..1000000). Running servers use it from their next segment.\n", args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, "TAG", "N"); err != nil {
		return err
	}
	tag := pos[0]
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	step, err := strconv.Atoi(pos[1])
	if err != nil {
		return usageErrorf("step %q is not a whole number", pos[1])
	}
	if err := checkStep(step); err != nil {
		return err
	}
	return a.withStore(ctx, flags, mustExist, func(s segmentStore) error {
		if err := s.SetStep(ctx, tag, step); err != nil {
			return fmt.Errorf("set step of %s: %w", tag, err)
		}
		fmt.Fprintf(a.stdout, "tag %s: step %d\n", tag, step)
		return nil
	})
}

// orderedStore is the store's lease table of ordered tags; nil when it
// keeps none.
func orderedStore(s segmentStore) leaf.OrderedStore {
	os, _ := s.(leaf.OrderedStore)
	return os
}

func (a *app) tagsOrder(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("order")
	pos, err := a.parseFlags(fs, "Usage: leaf tags order TAG on|off [flags]\n\n"+
		"Makes a tag ordered (on): one server at a time, the tag's owner, issues its IDs, which strictly\n"+
		"increase in the order they are issued across the cluster; the others pass requests on. off makes\n"+
		"it a plain tag again: every server issues from ranges of its own, increasing per server. Running\n"+
		"servers follow within segment.refresh_interval.\n", args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, "TAG", "on|off"); err != nil {
		return err
	}
	tag := pos[0]
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	var on bool
	switch pos[1] {
	case "on":
		on = true
	case "off":
	default:
		return usageErrorf("%q: want on or off", pos[1])
	}
	return a.withStoreConfig(ctx, flags, mustExist, func(s segmentStore, cfg config.Config) error {
		ordStore := orderedStore(s)
		if ordStore == nil {
			return fmt.Errorf("%w: the %s store keeps no ordered tags", leaf.ErrInvalidArgument, cfg.Segment.Store)
		}
		if err := ordStore.SetOrdered(ctx, tag, on); err != nil {
			return fmt.Errorf("order tag %s %s: %w", tag, pos[1], err)
		}
		if on {
			fmt.Fprintf(a.stdout, "tag %s: ordered\n", tag)
		} else {
			fmt.Fprintf(a.stdout, "tag %s: plain (not ordered)\n", tag)
		}
		return nil
	})
}

func (a *app) tagsDelete(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("delete")
	pos, err := a.parseFlags(fs, "Usage: leaf tags delete TAG [flags]\n\nDeletes a tag's row and keeps its tombstone beside it: created again, the tag\ncontinues above every ID it issued. Running servers drop it within\nsegment.refresh_interval, or as soon as they need a new range.\n", args)
	if err != nil {
		return err
	}
	tag, err := tagArg(pos)
	if err != nil {
		return err
	}
	return a.withStore(ctx, flags, mustExist, func(s segmentStore) error {
		if err := s.DeleteTag(ctx, tag); err != nil {
			return fmt.Errorf("delete tag %s: %w", tag, err)
		}
		fmt.Fprintf(a.stdout, "deleted tag %s\n", tag)
		return nil
	})
}

// parseShape checks the shape flags of tags create and returns the shape:
// bad ones are usage errors, found before the store is opened.
func parseShape(tag, period, tz, format string, opaqueBits int) (leaf.TagShape, error) {
	sh, err := tagshape.ParseShape(tag, period, tz, format, opaqueBits)
	if err != nil && !errors.Is(err, leaf.ErrInvalidTag) {
		err = flagError(err)
	}
	return sh, err
}

// flagError names the flags in a shape error's words: Validate speaks of
// a "time zone", the flag is --tz.
func flagError(err error) error {
	return fmt.Errorf("%w (flags --period, --tz, --format, --opaque-bits)", err)
}

func (a *app) tagsGet(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("get")
	asJSON := fs.Bool("json", false, "print the row as GET /v2/tags/{tag} answers it")
	pos, err := a.parseFlags(fs, "Usage: leaf tags get TAG [--json] [flags]\n\n"+
		"Shows a tag's row and shape, and for a periodic tag its period now and its latest periods.\n", args)
	if err != nil {
		return err
	}
	tag, err := tagArg(pos)
	if err != nil {
		return err
	}
	return a.withStore(ctx, flags, mustExist, func(s segmentStore) error {
		al, err := s.Alloc(ctx, tag)
		if err != nil {
			return fmt.Errorf("get tag %s: %w", tag, err)
		}
		sh, err := s.TagShape(ctx, tag)
		if err != nil {
			return fmt.Errorf("get tag %s: %w", tag, err)
		}
		row := httpapi.NewTagRow(al, sh)
		if err := httpapi.AddOwner(ctx, orderedStore(s), &row); err != nil {
			return fmt.Errorf("get tag %s: %w", tag, err)
		}
		var latest []leaf.PeriodAlloc
		if sh.Period != leaf.PeriodNone {
			n, err := s.CountPeriods(ctx, tag)
			if err != nil {
				return fmt.Errorf("count the periods of %s: %w", tag, err)
			}
			row.PeriodCount = &n
			if loc, err := tagshape.Location(sh.TimeZone); err == nil {
				row.CurrentPeriod = tagshape.PeriodKey(sh.Period, time.Now().In(loc))
			}
			if latest, err = s.Periods(ctx, tag, "", getPeriods); err != nil {
				return fmt.Errorf("list the periods of %s: %w", tag, err)
			}
		}
		if *asJSON {
			b, err := json.MarshalIndent(row, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s\n", b)
			return err
		}
		return a.printTag(row, latest)
	})
}

// getPeriods is how many of a periodic tag's latest periods tags get shows.
const getPeriods = 10

// printTag prints a tag's row as tags get shows it: one setting a line.
func (a *app) printTag(row httpapi.TagRow, latest []leaf.PeriodAlloc) error {
	var b bytes.Buffer
	line := func(k, v string) { fmt.Fprintf(&b, "%-14s%s\n", k, v) }
	line("tag", row.Tag)
	if row.Period != "" {
		line("max_id", strconv.FormatInt(row.MaxID, 10)+" (the start value of every period)")
	} else {
		line("max_id", strconv.FormatInt(row.MaxID, 10))
	}
	line("step", strconv.Itoa(row.Step))
	line("description", printable(row.Description))
	if !row.UpdateTime.IsZero() {
		line("update_time", row.UpdateTime.Format(time.RFC3339))
	}
	if row.Period == "" && row.Format == "" && row.OpaqueBits == 0 {
		line("shape", "plain")
	} else {
		for _, kv := range [][2]string{{"period", row.Period}, {"time_zone", row.TimeZone}, {"format", row.Format}} {
			if kv[1] != "" {
				line(kv[0], kv[1])
			}
		}
		if row.OpaqueBits != 0 {
			line("opaque_bits", strconv.Itoa(row.OpaqueBits))
		}
	}
	if row.Ordered {
		owner := "none (the next request's server takes it)"
		if row.Owner != "" {
			owner = row.Owner
		}
		line("ordered", "yes, owner "+owner)
	}
	if row.PeriodCount != nil {
		line("period_now", row.CurrentPeriod)
		var keys []string
		for _, p := range latest {
			keys = append(keys, fmt.Sprintf("%s (max_id %d)", p.Key, p.MaxID))
		}
		what := strconv.Itoa(*row.PeriodCount)
		if len(keys) > 0 {
			what += ", latest first: " + strings.Join(keys, ", ")
		}
		line("periods", what)
	}
	_, err := a.stdout.Write(b.Bytes())
	return err
}

func (a *app) tagsPrune(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("prune")
	keep := fs.Int("keep", 0, "keep the N latest periods, the current one counted (N >= 2), and remove the older ones")
	before := fs.String("before", "", "remove the periods below this one (yyyymmdd, yyyymm or yyyy), at most the one before the current")
	pos, err := a.parseFlags(fs, "Usage: leaf tags prune TAG (--keep N | --before PERIOD) [flags]\n\n"+
		"Removes a periodic tag's old periods from the store, each leaving a tombstone: a server whose\n"+
		"clock is behind continues a pruned period above its IDs, never from the start value. The\n"+
		"current period and the one before, by this machine's clock, are never removed.\n", args)
	if err != nil {
		return err
	}
	tag, err := tagArg(pos)
	if err != nil {
		return err
	}
	pr := leaf.Prune{Keep: *keep, Before: *before}
	switch {
	case isSet(fs, "keep") == isSet(fs, "before"):
		return usageErrorf("prune needs --keep N or --before PERIOD, one of them")
	case isSet(fs, "keep") && (pr.Keep < 2 || pr.Keep > leaf.MaxPruneKeep):
		return fmt.Errorf("%w: --keep %d, want 2..%d: the current period and the one before are always kept", leaf.ErrInvalidArgument, pr.Keep, leaf.MaxPruneKeep)
	case isSet(fs, "before"):
		if err := tagshape.ValidatePeriodKey(pr.Before); err != nil {
			return err
		}
	}
	return a.withStore(ctx, flags, mustExist, func(s segmentStore) error {
		res, err := segment.PrunePeriods(ctx, s, tag, pr, time.Now())
		if err != nil {
			return fmt.Errorf("prune tag %s: %w", tag, err)
		}
		if len(res.Removed) == 0 {
			fmt.Fprintf(a.stdout, "tag %s: no period below %s to remove\n", tag, res.Before)
			return nil
		}
		keys := make([]string, len(res.Removed))
		for i, p := range res.Removed {
			keys[i] = p.Key
		}
		fmt.Fprintf(a.stdout, "tag %s: removed %d periods below %s: %s\n", tag, len(keys), res.Before, strings.Join(keys, " "))
		return nil
	})
}

// checkStep is leaf.ValidateStep, saying in words what is wrong with a step
// below 1.
func checkStep(step int) error {
	if step < 1 {
		return fmt.Errorf("%w: step %d: the step must be positive, 1..%d", leaf.ErrInvalidArgument, step, leaf.MaxStep)
	}
	return leaf.ValidateStep(step)
}

// isSet reports whether the command line set the flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
