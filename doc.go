// Package leaf is the vocabulary of the leaf ID service: the types, interfaces
// and sentinel errors shared by the generators, the stores and the transports.
//
// leaf issues globally unique, positive, trend-increasing 64-bit IDs in two
// modes, compatible with Meituan's Java Leaf:
//
//   - Segment mode: one row per business tag in the SQL table leaf_alloc. A
//     server reserves a range of step IDs in one transaction and hands them out
//     from memory with an atomic add; two buffers per tag, the next range loaded
//     in the background, so a slow or dead database does not stop issuing.
//     See package segment and the stores in sqlite, mysql and postgres;
//     package ordered adds tags whose IDs strictly increase across the
//     cluster, one server at a time issuing them under a lease.
//   - Snowflake mode: 41 bits of milliseconds, 10 bits of worker ID and 12 bits
//     of sequence, with worker IDs from a WorkerRegistry (local, zookeeper,
//     etcd, mysql). The worker persists a time high-water mark ahead of the
//     IDs it issues, so no clock step backwards, before or across a restart,
//     can repeat an ID. See package snowflake.
//
// Guarantees: no ID is issued twice for a tag, across goroutines, servers,
// crashes or restarts; every ID is in [1, 2^63-1]; IDs issued by one server
// for one tag strictly increase; failures are errors, never sentinel IDs.
//
// This package imports only the standard library, and its types are plain
// values: how they look in JSON or in Prometheus is for the transports
// (httpapi) and metrics to say. Data flows one way: transport (httpapi,
// grpcapi; ordered/forward for an ordered tag another server owns) →
// generator (segment, with the kinds plugged into it: ordered; snowflake) →
// store (sqlite, mysql, postgres) or worker registry (local, zookeeper,
// etcd, mysql); only the reads of tag administration go from the transport
// to the store directly.
package leaf
