package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/config"
	"github.com/leafgo/leaf/internal/tagpage"
)

const tagsUsage = `Usage:
  leaf tags list [--json] [--prefix P]
  leaf tags create TAG [--step N] [--start N] [--description S]
  leaf tags set-step TAG N
  leaf tags delete TAG

Manages the rows of leaf_alloc directly in the store named by the same
configuration as 'leaf serve' (--config, --data-dir, --segment-store,
--segment-dsn, LEAF_* variables). A running server sees a new tag on its
first request for it, and every change within segment.refresh_interval.
A tag name is 1-128 bytes of A-Z a-z 0-9 . _ : -

A deleted tag leaves a tombstone: created again without --start it
continues above every ID it issued before; a --start below that is refused.

list, set-step and delete never create the store: with the embedded SQLite
store, a file that is not there (a mistyped --data-dir) is an error naming
it. create makes a new store when there is none, and says so on stderr.
`

// storeKeys are the configuration keys that name the store.
var storeKeys = []string{"data_dir", "segment.store", "segment.dsn"}

func (a *app) tags(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErrorf("tags needs a subcommand: list, create, set-step or delete")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list":
		return a.tagsList(ctx, rest)
	case "create":
		return a.tagsCreate(ctx, rest)
	case "set-step":
		return a.tagsSetStep(ctx, rest)
	case "delete":
		return a.tagsDelete(ctx, rest)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, tagsUsage)
		return errHelp
	}
	return usageErrorf("unknown tags subcommand %q; want list, create, set-step or delete", sub)
}

// withStore loads the configuration, opens the store, runs f and closes the
// store again. Only create may make a new embedded store, and says so on
// stderr: a tag created in a mistyped --data-dir is one no server sees.
func (a *app) withStore(ctx context.Context, flags *config.Flags, create storeCreate, f func(segmentStore) error) error {
	cfg, err := config.Load(flags.Sources(a.env))
	if err != nil {
		return err
	}
	isNew := cfg.Segment.Store == config.StoreSQLite && !fileExists(cfg.SQLitePath())
	s, _, err := openStore(ctx, cfg, create)
	if err != nil {
		return err
	}
	if isNew {
		fmt.Fprintf(a.stderr, "leaf tags create: created a new SQLite store at %s\n", cfg.SQLitePath())
	}
	ferr := f(s)
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

// listPage is how many rows tags list reads at a time.
const listPage = 1000

// allocPager is the paged listing every store offers (see
// sqlstore.Store.AllocsPage).
type allocPager interface {
	AllocsPage(ctx context.Context, prefix, after string, limit int) ([]leaf.Alloc, error)
}

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
		err := eachPage(ctx, s, *prefix, func(page []leaf.Alloc) error { return out.rows(page) })
		if err != nil {
			return fmt.Errorf("list tags: %w", err)
		}
		return out.end()
	})
}

// eachPage calls f with the store's rows that begin with prefix, a page at
// a time, so that a table of a million tags is never held in memory whole.
func eachPage(ctx context.Context, s segmentStore, prefix string, f func([]leaf.Alloc) error) error {
	p, ok := s.(allocPager)
	if !ok {
		all, err := s.Allocs(ctx)
		if err != nil {
			return err
		}
		all = slices.DeleteFunc(all, func(a leaf.Alloc) bool { return !strings.HasPrefix(a.Tag, prefix) })
		return f(all)
	}
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

// rowWriter prints rows as they come, then ends the listing.
type rowWriter interface {
	rows([]leaf.Alloc) error
	end() error
}

// jsonArrayWriter prints one JSON array, element by element, as
// json.Encoder with a two-space indent prints the whole array.
type jsonArrayWriter struct {
	w io.Writer
	n int
}

func (j *jsonArrayWriter) rows(page []leaf.Alloc) error {
	var b bytes.Buffer
	for _, al := range page {
		el, err := json.MarshalIndent(al, "  ", "  ")
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

var tableHeader = []string{"TAG", "MAX_ID", "STEP", "UPDATE_TIME", "DESCRIPTION"}

func (t *tableWriter) rows(page []leaf.Alloc) error {
	cells := make([][]string, 0, len(page)+1)
	if !t.header {
		t.header = true
		cells = append(cells, tableHeader)
		t.widths = make([]int, len(tableHeader)-1) // the last cell is not padded
	}
	for _, al := range page {
		updated := "-"
		if !al.UpdateTime.IsZero() {
			updated = al.UpdateTime.Format(time.RFC3339)
		}
		cells = append(cells, []string{al.Tag, strconv.FormatInt(al.MaxID, 10), strconv.Itoa(al.Step), updated, printable(al.Description)})
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
	fs, flags := tagFlagSet("create")
	step := fs.Int("step", 1000, "IDs reserved per segment, 1..1000000 (the adaptive step never goes below it)")
	start := fs.Int64("start", 0, "the first ID to issue, >= 1 (default: 1, or above every ID issued under a deleted tag of the same name)")
	desc := fs.String("description", "", "free text, at most 256 bytes")
	pos, err := a.parseFlags(fs, "Usage: leaf tags create TAG [--step N] [--start N] [--description S] [flags]\n\nCreates a tag in the store.\n", args)
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
	return a.withStore(ctx, flags, mayCreate, func(s segmentStore) error {
		if err := s.CreateTag(ctx, alloc); err != nil {
			return fmt.Errorf("create tag %s: %w", alloc.Tag, err)
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

func (a *app) tagsDelete(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("delete")
	pos, err := a.parseFlags(fs, "Usage: leaf tags delete TAG [flags]\n\nDeletes a tag's row and keeps its tombstone beside it: created again, the tag\ncontinues above every ID it issued. Running servers drop it within\nsegment.refresh_interval, or as soon as they need a new range.\n", args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, "TAG"); err != nil {
		return err
	}
	tag := pos[0]
	if err := leaf.ValidateTag(tag); err != nil {
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
