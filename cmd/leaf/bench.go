package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/bench"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
)

const benchUsage = `Usage: leaf bench [--server [ZONE=]URL... [--zone ZONE] | --grpc ADDR] [flags]

Sends requests for IDs to a running server from --concurrency goroutines
for --duration, and reports throughput, errors and latency. Over HTTP it
uses Leaf's routes, /api/segment/get/TAG and /api/snowflake/get/TAG (with
?count=N when --count > 1); over gRPC, NextID(s) or SnowflakeNextID(s).

With several servers (--server repeated or comma-separated) or servers in
zones (--server dc1=http://10.0.0.1:8080), the workers share one Go client
(package client, the /v2 routes) and measure what an application sees:
round robin, failover (a request fails only when the client gives up on
it) and, with --zone, that zone's servers first. The summary counts the
requests each server got.

With --rate N the workers share a schedule of N requests a second, evenly
spaced, instead of each sending its next request as soon as it has an
answer: a steady load for soak tests. A worker whose answer comes late sends
its next request at once, until the schedule is caught up. Latency is then
measured from when each request was due by the schedule, not from when it
was sent, so a server that stalls shows in the quantiles as it would to
clients arriving at that rate (no coordinated omission); the service time,
from send to answer, is reported beside it.

Every answer is checked: a request counts as an error if its status is not
200 (gRPC: not OK), its body is not --count positive decimal IDs one per
line, or its IDs are not strictly increasing. --check-unique also keeps
every ID (up to 50,000,000) and reports repeats.

Progress goes to stderr once a second (--quiet turns it off); the summary,
text or --json, to stdout. Latencies are those of successful requests; the
IDs counted are those of successful answers, and with --check-unique every
one of them is checked (up to the cap) against every other ID received.

Exit status: 0 when every request succeeded (and no ID repeated), 1 if the
server is unreachable at the start, any request failed or an ID repeated
(the summary is printed first), 2 for bad flags.
`

// bench is 'leaf bench': flags in, package bench's run, the summary out.
func (a *app) bench(ctx context.Context, args []string) error {
	o, asJSON, err := a.benchFlags(args)
	if err != nil {
		return err
	}
	sum, err := bench.Run(ctx, *o)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(sum)
	} else {
		err = sum.WriteText(a.stdout)
	}
	if err != nil {
		return err
	}
	return sum.Err()
}

// benchFlags parses and checks the command line, naming the flag at fault.
func (a *app) benchFlags(args []string) (o *bench.Config, asJSON bool, err error) {
	fs := newFlagSet("bench")
	var serverList serverFlag
	fs.Var(&serverList, "server", serverFlagUsage)
	zone := fs.String("zone", "", zoneFlagUsage)
	grpcAddr := fs.String("grpc", "", "`ADDR` (host:port) of the gRPC server, instead of --server (plaintext, TLS with --cacert)")
	cacert := fs.String("cacert", "", cacertUsage+"; with --grpc, connect over TLS")
	mode := fs.String("mode", "segment", "which IDs to ask for: `segment` or snowflake")
	tag := fs.String("tag", config.SeedTag, "segment `TAG` (in snowflake mode the key, which the server ignores)")
	count := fs.Int("count", 1, "IDs per request, 1..10000; 1 asks for single IDs, more for batches")
	conc := fs.Int("concurrency", bench.DefaultConcurrency, fmt.Sprintf("concurrent requests (workers; HTTP connections), 1..%d", bench.MaxConcurrency))
	dur := fs.Duration("duration", bench.DefaultDuration, "how long to send requests, 100ms..1h")
	rate := fs.Int("rate", 0, fmt.Sprintf("requests per second in all, evenly spaced, 0..%d; 0: as fast as the workers go", bench.MaxRate))
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	jsonOut := fs.Bool("json", false, "print the summary as JSON")
	unique := fs.Bool("check-unique", false, fmt.Sprintf("keep every ID (up to %d) and check that none repeats", bench.MaxUnique))
	pos, err := a.parseFlags(fs, benchUsage, args)
	if err != nil {
		return nil, false, err
	}
	if len(pos) > 0 {
		return nil, false, usageErrorf("takes no arguments, got %q", pos[0])
	}
	o = &bench.Config{Mode: *mode, Tag: *tag, Count: *count, Concurrency: *conc, Duration: *dur, Rate: *rate,
		CheckUnique: *unique, UniqueCap: bench.MaxUnique}
	if !*quiet {
		o.Progress = a.stderr
	}
	switch {
	case *grpcAddr != "" && len(serverList) > 0:
		return nil, false, usageErrorf("--server and --grpc exclude each other")
	case *grpcAddr != "" && *zone != "":
		return nil, false, usageErrorf("--zone is for --server, not --grpc")
	case *grpcAddr != "":
		host, port, err := net.SplitHostPort(*grpcAddr)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, false, usageErrorf("--grpc %q is not host:port", *grpcAddr)
		}
		o.GRPC = *grpcAddr
	default:
		srv, err := a.resolveServers(serverList, *zone)
		if err != nil {
			return nil, false, err
		}
		o.URL, o.Servers, o.Zone = srv.one, srv.eps, srv.zone
		if len(o.Servers) > 0 {
			o.Logger = warnLogger(a.stderr)
		}
		if *cacert != "" {
			if err := srv.httpsOnly(); err != nil {
				return nil, false, usageErrorf("--cacert is for an https:// server or --grpc; %v", err)
			}
		}
	}
	if *cacert != "" {
		if o.TLS, err = clientTLS(*cacert); err != nil {
			return nil, false, err
		}
	}
	if o.Mode != "segment" && o.Mode != "snowflake" {
		return nil, false, usageErrorf("--mode %q is not segment or snowflake", o.Mode)
	}
	if err := leaf.ValidateTag(o.Tag); err != nil {
		return nil, false, err
	}
	if err := leaf.ValidateCount(o.Count); err != nil {
		return nil, false, err
	}
	if o.Concurrency < 1 || o.Concurrency > bench.MaxConcurrency {
		return nil, false, usageErrorf("--concurrency %d: want 1..%d", o.Concurrency, bench.MaxConcurrency)
	}
	if o.Duration < bench.MinDuration || o.Duration > bench.MaxDuration {
		return nil, false, usageErrorf("--duration %v: want 100ms..1h", o.Duration)
	}
	if o.Rate < 0 || o.Rate > bench.MaxRate {
		return nil, false, usageErrorf("--rate %d: want 0..%d", o.Rate, bench.MaxRate)
	}
	return o, *jsonOut, nil
}
