package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/internal/sqlstore"
	"github.com/leafgo/leaf/multidb"
)

const dbUsage = `Usage:
  leaf db init [--segment-dsn DSN --segment-dsn DSN ...]
  leaf db migrate --to DSN --to DSN [--to DSN ...] [--from DSN ...]
  leaf db fence [--segment-dsn DSN] [--margin-steps N]

Commands on the databases of the segment store itself.

init sets up new, empty databases (mysql or postgres) as one segment store
spread over them, in the order of segment.dsn (a list of 2 or more, from
the configuration, LEAF_SEGMENT_DSN or --segment-dsn repeated): each
records its place. Run it once, before the first server starts; servers
never set databases up, so that two servers given different lists cannot
both run. Every database must answer and hold no tag yet: a database in
use is spread over several with migrate instead.

migrate spreads a segment store (mysql or postgres) over more databases:
one database to several, or N to N+1 and more. Every ID a tag issues after
it is above every ID the tag issued before, and each database records its
new place in the list. It is offline:

  1. Stop every server issuing from these databases, Java Leaf included.
  2. leaf db migrate --from OLD... --to NEW...
  3. Start the servers with segment.dsn set to the new list, in the same
     order on every server.

A server started with the old list after step 2 refuses to start, as does
one whose list is in another order. --from is the current list, in its
order (default: segment.dsn); --to the new one, which keeps every database
of --from, spelled the same, and adds at least one. Each flag is repeated
once per database, or takes one DSN per line. Only plain tags can move:
periodic, formatted, opaque and ordered tags need a store of one database.
A store holding any is refused before anything changes; an ordered tag
can be made plain first with 'leaf tags order TAG off'.
A migration that failed part-way (a database down) can be run again with
the same lists; one already done is reported as such and changes nothing.

fence fences the database of a segment store (mysql or postgres, one
database) after a failover switched by hand: every tag is raised above the
ranges the running servers report within segment.failover.window, plus
--margin-steps of its step (default segment.failover.margin_steps), so that
no range reserved on the old primary and lost in the switch is reserved
again. The servers detect a failover and fence it themselves (the
default, segment.failover.fence); run this where they cannot see it: a
switch to a replica whose copy of leaf_failover names it already (a
replica restored from a backup of itself), or with fencing off. Running
servers go on issuing from their buffers during the window. It prints the
gap.

Exit status: 0 done (migrate: or already done), 1 a database failed (run
it again), 2 lists that cannot be set up or migrated, or a store that
cannot be fenced (see the message).
`

func (a *app) db(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErrorf("db needs a subcommand: init, migrate or fence")
	}
	switch args[0] {
	case "init":
		return a.dbInit(ctx, args[1:])
	case "fence":
		return a.dbFence(ctx, args[1:])
	case "migrate":
		return a.dbMigrate(ctx, args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, dbUsage)
		return errHelp
	}
	return usageErrorf("unknown db subcommand %q; want init, migrate or fence", args[0])
}

func (a *app) dbInit(ctx context.Context, args []string) error {
	fs := newFlagSet("db init")
	flags := config.BindFlags(fs, "data_dir", "segment.store", "segment.dsn", "log.level", "log.format")
	block := fs.Int64("block", multidb.DefaultBlock, "IDs per block: database i of N issues the blocks numbered i mod N")
	cfg, err := a.dbConfig(fs, flags, args)
	if err != nil {
		return err
	}
	dsns := cfg.Segment.DSNs()
	if !cfg.Segment.MultiDatabase() {
		return usageErrorf("segment.dsn lists %d database(s); init sets up a store of 2 or more (a store of one database needs no set-up)", len(dsns))
	}
	dbs, err := memberDatabases(cfg.Segment.Store, dsns)
	if err != nil {
		return err
	}
	cluster, err := multidb.Init(ctx, dbs, multidb.Config{Block: *block, Logger: newLogger(cfg.Log, a.stderr)})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "set up %d databases as one segment store (blocks of %d IDs, cluster %s)\n", len(dbs), *block, cluster)
	a.printList(dbs)
	return nil
}

// dbConfig parses a db subcommand's flags, which take no arguments, and
// loads the configuration they complete.
func (a *app) dbConfig(fs *flag.FlagSet, flags *config.Flags, args []string) (config.Config, error) {
	pos, err := a.parseFlags(fs, dbUsage, args)
	if err != nil {
		return config.Config{}, err
	}
	if len(pos) > 0 {
		return config.Config{}, usageErrorf("takes no arguments, got %q", pos[0])
	}
	return config.Load(flags.Sources(a.env))
}

// dbFence fences the store's database by hand (see dbUsage).
func (a *app) dbFence(ctx context.Context, args []string) error {
	fs := newFlagSet("db fence")
	flags := config.BindFlags(fs, "data_dir", "segment.store", "segment.dsn", "log.level", "log.format")
	margin := fs.Int("margin-steps", -1, "steps of its step every tag is raised by beyond what the servers report (default segment.failover.margin_steps)")
	cfg, err := a.dbConfig(fs, flags, args)
	if err != nil {
		return err
	}
	if *margin > 1_000_000 {
		return usageErrorf("--margin-steps %d, want 0..1000000", *margin)
	}
	if cfg.Segment.Store == config.StoreSQLite || cfg.Segment.MultiDatabase() {
		return usageErrorf("segment.store is %s with %d database(s): only a mysql or postgres store of one database is fenced (SQLite has no replica)",
			cfg.Segment.Store, len(cfg.Segment.DSNs()))
	}
	fc := cfg.Segment.Failover
	if *margin >= 0 {
		fc.MarginSteps = *margin
	}
	log := newLogger(cfg.Log, a.stderr)
	s, desc, err := openStore(ctx, cfg, mustExist, log)
	if err != nil {
		return err
	}
	defer s.Close()
	set := sqlstore.FailoverConfig{Window: fc.Window, Lag: fc.Lag, MarginSteps: int64(fc.MarginSteps), Logger: log}
	watch := failoverOf(s)
	if watch == nil {
		return usageErrorf("segment store %s cannot be fenced", desc)
	}
	if err := watch(ctx, set); err != nil {
		return fmt.Errorf("fence %s: %w", desc, err)
	}
	st, err := s.(interface {
		Fence(context.Context) (sqlstore.FailoverStatus, error)
	}).Fence(ctx)
	if err != nil {
		return fmt.Errorf("fence %s: %w", desc, err)
	}
	fmt.Fprintf(a.stdout, "fenced %s: database %s, epoch %d, every tag raised by %d steps (%d IDs in all)\n",
		desc, st.Live, st.Epoch, fc.MarginSteps, st.Gap)
	return nil
}

// dsnList is a repeated flag of DSNs; a value may also hold one per line.
type dsnList []string

func (l *dsnList) String() string { return strings.Join(*l, "\n") }

func (l *dsnList) Set(s string) error {
	before := len(*l)
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			*l = append(*l, line)
		}
	}
	if len(*l) == before {
		return fmt.Errorf("an empty DSN")
	}
	return nil
}

func (l *dsnList) ArgName() string { return "dsn" }

func (a *app) dbMigrate(ctx context.Context, args []string) error {
	fs := newFlagSet("db migrate")
	flags := config.BindFlags(fs, "data_dir", "segment.store", "log.level", "log.format")
	var from, to dsnList
	fs.Var(&from, "from", "a database of the current list, repeated in its order (default: segment.dsn)")
	fs.Var(&to, "to", "a database of the new list, repeated in its order: every database of --from, spelled the same, and at least one more")
	block := fs.Int64("block", 0, "IDs per block of the new layout (default: the old layout's; 10000 for a store of one database)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, err := a.parseFlags(fs, dbUsage, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("takes no arguments, got %q", pos[0])
	}
	src := flags.Sources(a.env)
	if len(from) > 0 {
		// --from is the current list: it stands for segment.dsn, and is
		// checked as that is.
		src.Flags["segment.dsn"] = config.JoinDSNs(from)
	}
	cfg, err := config.Load(src)
	if err != nil {
		return err
	}
	store := cfg.Segment.Store
	if store != config.StoreMySQL && store != config.StorePostgres {
		return usageErrorf("segment.store is %s: only mysql and postgres stores span several databases (set --segment-store)", store)
	}
	from = cfg.Segment.DSNs()
	switch {
	case len(from) == 0:
		return usageErrorf("no current list: give --from, or segment.dsn")
	case len(to) <= len(from):
		return usageErrorf("--to lists %d database(s) and --from %d: a migration keeps every database and adds at least one", len(to), len(from))
	case len(to) > leaf.MaxStripes:
		return usageErrorf("--to lists %d databases, at most %d", len(to), leaf.MaxStripes)
	}
	// Checked here too, before connecting: a database of the old list
	// left out of the new one would issue its IDs again.
	for i, d := range from {
		if !slices.Contains(to, d) {
			return usageErrorf("database %d of --from (%s) is not in the new list: a migration keeps every database, spelled the same", i, config.RedactDSN(d))
		}
	}
	fromDBs, err := memberDatabases(store, from)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	toDBs, err := memberDatabases(store, to)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	log := newLogger(cfg.Log, a.stderr)
	rep, err := multidb.Migrate(ctx, fromDBs, toDBs, multidb.Config{Block: *block, Logger: log})
	if ordered := (*multidb.OrderedTagsError)(nil); errors.As(err, &ordered) {
		return fmt.Errorf("%w. Nothing was changed. To make a tag plain, run 'leaf tags order TAG off' on the current store"+
			" (segment.dsn set to --from's database), then migrate again", err)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	a.printMigration(rep, fromDBs, toDBs)
	return nil
}

// printMigration writes what migrate did and the list to start with.
func (a *app) printMigration(rep multidb.Report, from, to []multidb.Database) {
	w := a.stdout
	if rep.Already {
		fmt.Fprintf(w, "already migrated: the %d databases record this layout (blocks of %d IDs, cluster %s); nothing changed\n",
			rep.Databases, rep.Block, rep.Cluster)
	} else {
		fmt.Fprintf(w, "migrated %d database(s) to %d (blocks of %d IDs, cluster %s): %d tag(s) moved\n",
			len(from), rep.Databases, rep.Block, rep.Cluster, len(rep.Tags))
		if len(rep.Tags) > 0 {
			tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "  TAG\tSTATE\tIDS ISSUED BELOW\tEACH DATABASE CONTINUES FROM NUMBER")
			for _, m := range rep.Tags {
				state := "live"
				switch {
				case !m.Live:
					state = "deleted"
				case m.Tombstone:
					state = "live, deleted before"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", m.Tag, state, m.Bound, m.Number)
			}
			_ = tw.Flush()
		}
	}
	a.printList(to)
}

// printList writes the list the servers must be started with.
func (a *app) printList(dbs []multidb.Database) {
	fmt.Fprintf(a.stdout, "Start every server with segment.dsn listing these databases, in this order:\n")
	for i, d := range dbs {
		fmt.Fprintf(a.stdout, "  %d  %s\n", i, d.Name)
	}
}
