package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // runtime error: store unreachable, tag not found, server error
	exitUsage   = 2 // the command line (or configuration) is wrong
)

// exitCodes maps errors to exit statuses: the one table for the whole CLI.
// The first entry whose error matches (errors.Is) wins; anything unlisted is
// a runtime failure. Invalid input is a usage error whether it was caught by
// flag parsing, the configuration, or the validators of package leaf.
var exitCodes = []struct {
	err  error
	code int
}{
	{errUsage, exitUsage},
	{config.ErrInvalid, exitUsage},
	{leaf.ErrInvalidTag, exitUsage},
	{leaf.ErrInvalidCount, exitUsage},
	{leaf.ErrInvalidArgument, exitUsage},
	// The list of databases disagrees with what they record: the list is
	// the setting to fix (its order, a database missing or added).
	{leaf.ErrStripeLayout, exitUsage},
	{leaf.ErrTagNotFound, exitFailure},
	{leaf.ErrTagExists, exitFailure},
	{leaf.ErrTagTombstoned, exitFailure},
	{leaf.ErrNotReady, exitFailure},
	{leaf.ErrClockBackwards, exitFailure},
	{leaf.ErrWorkerIDsExhausted, exitFailure},
	{leaf.ErrWorkerInUse, exitFailure},
	{leaf.ErrClockSkew, exitFailure},
	{leaf.ErrClosed, exitFailure},
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	for _, e := range exitCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return exitFailure
}

// errUsage marks a malformed command line. The message says what is wrong;
// the caller adds a pointer to the help.
var errUsage = errors.New("usage error")

// usageErrorf builds an error that wraps errUsage without printing it.
func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

// errHelp is returned when the user asked for help and got it: exit 0.
var errHelp = errors.New("help requested")

// app is one invocation of the CLI with its environment made explicit, so
// tests can run many in one process.
type app struct {
	stdout, stderr io.Writer
	env            []string // os.Environ form
	// onListen, if set, is called with the address serve listens on.
	onListen func(net.Addr)
	// onLogger, if set, is called with the logger serve builds; main makes
	// it the process default.
	onLogger func(*slog.Logger)
	// hostname names this host for the ordinal registry; nil: os.Hostname.
	hostname func() (string, error)
}

// command is one subcommand.
// The summaries live in mainUsage.
type command struct {
	name string
	run  func(a *app, ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"serve", (*app).serve},
		{"get", (*app).get},
		{"bench", (*app).bench},
		{"decode", (*app).decode},
		{"tags", (*app).tags},
		{"db", (*app).db},
		{"version", (*app).versionCmd},
		{"help", (*app).help},
	}
}

func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, mainUsage)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-v", "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			return a.finish(messagePrefix(name, rest), c.run(a, ctx, rest))
		}
	}
	return a.finish("leaf", usageErrorf("unknown command %q", name))
}

// messagePrefix names the command in error messages: "leaf serve",
// "leaf tags create".
func messagePrefix(name string, rest []string) string {
	prefix := "leaf " + name
	if name == "tags" && len(rest) > 0 {
		switch rest[0] {
		case "list", "create", "set-step", "delete":
			prefix += " " + rest[0]
		}
	}
	if name == "db" && len(rest) > 0 && (rest[0] == "init" || rest[0] == "migrate") {
		prefix += " " + rest[0]
	}
	return prefix
}

// finish prints err, if any, and turns it into an exit status.
func (a *app) finish(prefix string, err error) int {
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errUsage):
		help := "leaf help"
		if prefix != "leaf" {
			help = prefix + " -h"
		}
		fmt.Fprintf(a.stderr, "%s: %v\nRun '%s' for usage.\n", prefix, err, help)
	default:
		fmt.Fprintf(a.stderr, "%s: %v\n", prefix, err)
	}
	return exitCode(err)
}

const mainUsage = `leaf issues unique, increasing 64-bit IDs (compatible with Meituan's Leaf).

Usage:
  leaf serve [flags]                      run the ID server
  leaf get TAG [--count N] [--server URL] fetch IDs from a running server
  leaf bench [--server URL | --grpc ADDR] load-test a running server
  leaf decode [--json] ID...              take snowflake IDs apart
  leaf tags list [--json]                 list segment tags in the store
  leaf tags create TAG [--step N] [--start N] [--description S]
  leaf tags set-step TAG N
  leaf tags delete TAG
  leaf db init                            set up the databases of segment.dsn
                                          as one store spread over them
  leaf db migrate --from DSN... --to DSN...
                                          spread the segment store over more
                                          databases (offline; see leaf db -h)
  leaf version                            print version and build information
                                          (also leaf --version, leaf -v)
  leaf help [COMMAND]                     show help for a command

With no configuration, 'leaf serve' listens on 127.0.0.1:8080, keeps its
segments in ./leaf-data/leaf.db, seeded with the tag leaf-segment-test, and
issues snowflake IDs as local worker 0:
  curl 127.0.0.1:8080/api/segment/get/leaf-segment-test
  curl 127.0.0.1:8080/api/snowflake/get/any

Configuration, lowest precedence first: defaults, a YAML file (--config FILE
or LEAF_CONFIG), LEAF_* environment variables, flags. Every key is described
in etc/leaf.yml.

Exit status: 0 success, 1 error, 2 usage error.
`

func (a *app) help(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return usageErrorf("help takes at most one command, got %d arguments", len(args))
	}
	// "leaf help -h" is help about help: the main usage, which the usage
	// errors of this command point to.
	if len(args) == 0 || isHelpArg(args[0]) {
		fmt.Fprint(a.stdout, mainUsage)
		return errHelp
	}
	for _, c := range commands() {
		if c.name == args[0] {
			// Every command prints its own usage on -h.
			return c.run(a, ctx, []string{"-h"})
		}
	}
	return usageErrorf("unknown command %q", args[0])
}

func isHelpArg(s string) bool {
	switch s {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// newFlagSet makes a FlagSet that reports errors to us instead of printing
// them, so that run decides the stream and the exit status.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args, allowing flags after positional arguments
// ("leaf tags create T --step 10"), which the flag package alone does not. A
// "--" ends the flags: what follows is positional even if it starts with '-'.
// A negative number ("leaf tags set-step T -5") is positional too, unless it
// is the value of the flag before it: no flag is named by digits, and the
// flag package would report "-5" as an undefined flag, hiding what is wrong
// with the value.
// On -h it prints usage and the FlagSet's flags to stdout and returns errHelp.
func (a *app) parseFlags(fs *flag.FlagSet, usage string, args []string) ([]string, error) {
	var positional []string
	for {
		// Parse only up to the first negative number that is an argument.
		head, neg := args, negativeArg(fs, args)
		if neg >= 0 {
			head = args[:neg]
		}
		err := fs.Parse(head)
		if errors.Is(err, flag.ErrHelp) {
			a.printUsage(a.stdout, fs, usage)
			return nil, errHelp
		}
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		rest := fs.Args()
		// Parse stops at the first non-flag or just after "--"; in the
		// second case everything left is positional.
		if consumed := head[:len(head)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(append(positional, rest...), args[len(head):]...), nil
		}
		if len(rest) == 0 {
			if neg < 0 {
				return positional, nil
			}
			positional = append(positional, args[neg])
			args = args[neg+1:]
			continue
		}
		positional = append(positional, rest[0])
		args = args[len(head)-len(rest)+1:]
	}
}

// negativeArg is the index of the first argument before any "--" that is a
// negative number and not the value of a flag before it; -1 if none.
func negativeArg(fs *flag.FlagSet, args []string) int {
	for i, arg := range args {
		if arg == "--" {
			return -1
		}
		if !isNegativeNumber(arg) {
			continue
		}
		if i > 0 && takesValue(fs, args[i-1]) {
			continue
		}
		return i
	}
	return -1
}

// isNegativeNumber: a '-' and a digit. No flag name starts with a digit, so
// such an argument is never a flag, whatever follows.
func isNegativeNumber(s string) bool {
	return len(s) >= 2 && s[0] == '-' && s[1] >= '0' && s[1] <= '9'
}

// takesValue reports whether arg is a flag of fs that takes the next
// argument as its value: "--step", not "--step=5" nor a boolean flag.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimPrefix(name, "-"))
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// printUsage writes the command's usage and its flags. It replaces
// flag.PrintDefaults to show GNU-style "--name" (both spellings work) and
// the argument names and defaults that configuration-bound flags describe.
func (a *app) printUsage(w io.Writer, fs *flag.FlagSet, usage string) {
	fmt.Fprint(w, usage)
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		name, help := flag.UnquoteUsage(f)
		if an, ok := f.Value.(interface{ ArgName() string }); ok {
			name = an.ArgName()
		}
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		if _, isConfig := f.Value.(interface{ ArgName() string }); !isConfig && !isZeroDefault(f.DefValue) {
			help += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(help, "\n", "\n    \t"))
	})
}

func isZeroDefault(v string) bool {
	return v == "" || v == "0" || v == "false"
}
