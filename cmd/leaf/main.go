// Command leaf is the leaf ID server and its command-line tools.
//
//	leaf serve                   run the server (zero configuration: SQLite under ./leaf-data)
//	leaf get TAG                 fetch IDs from a running server
//	leaf tags list|create|set-step|delete
//	                             manage segment tags directly in the store
//	leaf decode ID...            take snowflake IDs apart
//	leaf bench                   load-test a running server (HTTP or gRPC)
//	leaf version                 print version and build information (also --version, -v)
//
// Configuration comes from, lowest precedence first: built-in defaults, a
// YAML file (--config or LEAF_CONFIG; see etc/leaf.yml), LEAF_* environment
// variables, flags. Exit status: 0 success, 1 runtime error, 2 usage error.
//
// This package only wires: it reads the configuration and hands it to the
// stores, the generator and the HTTP handler. Everything testable lives in
// run, which takes its arguments, environment and output streams explicitly.
package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"
)

func main() {
	// The MySQL driver logs dropped connections itself, on stderr, in its own
	// format; during an outage the generator's warning says it once. Set here,
	// once per process: SetLogger is not safe to call while the driver runs.
	gomysql.SetLogger(log.New(driverLog{}, "", 0))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default behaviour so a second
		// Ctrl-C kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	a := &app{stdout: os.Stdout, stderr: os.Stderr, env: os.Environ(),
		// Libraries that log through slog's default (the MySQL driver) follow
		// the configured level and format. Only the process sets it: tests
		// run many servers at once.
		onLogger: slog.SetDefault}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// driverLog forwards a driver's log lines to the process logger at debug level.
type driverLog struct{}

func (driverLog) Write(p []byte) (int, error) {
	slog.Debug(strings.TrimSpace(string(p)), "source", "mysql driver")
	return len(p), nil
}
