// Command leaf is the leaf ID server and its command-line tools.
//
//	leaf serve                   run the server (zero configuration: SQLite under ./leaf-data)
//	leaf get TAG                 fetch IDs from a running server
//	leaf tags list|create|set-step|delete
//	                             manage segment tags directly in the store
//	leaf version                 print version and build information
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
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default behaviour so a second
		// Ctrl-C kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
