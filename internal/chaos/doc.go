// Package chaos holds the chaos test of the leaf binary (TestChaos, run with
// LEAF_CHAOS=1): three real 'leaf serve' processes on a MariaDB, a ZooKeeper
// and an etcd of the test's own, under a minute of concurrent HTTP load, while
// servers are killed with SIGKILL and restarted, the database and the
// registry are killed and brought back, and one server's clock steps back.
// Every ID returned is kept and checked for duplicates and order, and every
// error against the few the server promises. The etcd run spreads the
// segment store over two MariaDB instances (segment.dsn lists both), so its
// tags are multi-database tags: the outage kills one of the two, and IDs
// are checked to increase within each answer, ranges from the two
// databases interleaving; the zookeeper run keeps one database.
//
// The zookeeper run also has an ordered tag (docs/ordered-tags.md): its
// servers advertise their URLs and hold the tag under a 3 s owner lease,
// every other server crash kills the tag's owner, and one client goroutine
// asks the servers in turn for single IDs and small batches, each request
// after the previous answer: its IDs must strictly increase whichever
// server answered. The tag may answer 503 only while an owner may be gone
// (from a server's kill until its lease could have run out, plus a grace)
// or the database is out (plus the lease); any other failure of it counts
// like the others'.
//
// Why a separate harness: the unit and conformance suites prove each part
// with fakes and injected clocks, one fault at a time. The guarantees of
// SPEC §1 are about the whole process under faults that overlap with
// traffic: a crash between a reserve and its answer, a restart that reads a
// worker cache while the registry is gone, a database that dies while
// buffers drain. Those only show up with real processes, real signals and
// real services, so the test starts its own instances of each service rather
// than share the ones other tests use, which it is free to kill.
//
// Run it with
//
//	LEAF_CHAOS=1 go test -count=1 -v -run TestChaos ./internal/chaos
//
// (-run TestChaos/zookeeper or TestChaos/etcd for one registry).
// LEAF_CHAOS_DURATION sets the load per registry (default 60s, at least 40s).
// The summary of each run is logged and written to
// $LEAF_TEST_ARTIFACTS/chaos-<registry>.txt (default /tmp/leaf-test-artifacts),
// the processes' logs to chaos-<registry>-logs/ beside it. MariaDB, ZooKeeper
// and etcd must be installed (scripts/services.sh does it); the test runs
// its own instances of them on free ports and kills only those, by PID.
//
// The package has no code outside its test; this file carries the
// documentation.
package chaos
