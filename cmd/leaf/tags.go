package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/config"
)

const tagsUsage = `Usage:
  leaf tags list [--json]
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

func (a *app) tagsList(ctx context.Context, args []string) error {
	fs, flags := tagFlagSet("list")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	pos, err := a.parseFlags(fs, "Usage: leaf tags list [--json] [flags]\n\nLists every tag in the store.\n", args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos); err != nil {
		return err
	}
	return a.withStore(ctx, flags, mustExist, func(s segmentStore) error {
		allocs, err := s.Allocs(ctx)
		if err != nil {
			return fmt.Errorf("list tags: %w", err)
		}
		if *asJSON {
			if allocs == nil {
				allocs = []leaf.Alloc{} // "[]", not "null", for scripts
			}
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(allocs)
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TAG\tMAX_ID\tSTEP\tUPDATE_TIME\tDESCRIPTION")
		for _, al := range allocs {
			updated := "-"
			if !al.UpdateTime.IsZero() {
				updated = al.UpdateTime.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", al.Tag, al.MaxID, al.Step, updated, printable(al.Description))
		}
		return tw.Flush()
	})
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
