// Package zookeeper holds two snowflake worker registries on ZooKeeper.
//
// Registry is Java Leaf's "zk_normal" mode, node for node, so that Java and
// Go servers of one leaf.name share a tree and never hand out one ID twice:
//
//	/snowflake/{Name}/forever/{ip}:{port}-{seq}   PERSISTENT_SEQUENTIAL,
//	    data {"ip":"10.0.0.1","port":"8080","timestamp":1590000000000}
//
// The ten-digit sequence ZooKeeper appends is the worker ID, and an endpoint
// keeps its node, hence its ID, for ever. The data is exactly what Java's
// Jackson writes (port a string; no other field, because Java's reader fails
// on unknown ones); timestamp is the endpoint's high-water mark, rewritten by
// every heartbeat. Two of Leaf's bugs are not copied: the sequence is taken
// after the last '-' of the name, so a leaf.name containing '-' works
// (Leaf#161), and the first node on an empty tree gets its real sequence
// rather than 0 (Leaf#98).
//
// Every claim is a lease kept in a persistent node (see lease.go), not the
// ZooKeeper session, which ends with any outage of a few seconds: the
// holder renews it every second by compare-and-set on the node's version
// and stops issuing before it can run out; another process takes it over
// only after watching it unchanged for a whole lease on its own monotonic
// clock; and a restart of the holder itself (the same instance identity,
// Config.Holder) takes it back at once.
//
//	/snowflake/{Name}/lease/{ip}:{port}  PERSISTENT, Registry's lease of the endpoint,
//	    data {"ip","port","timestamp":0,"holder":"host/id","lease_ms":60000,"clock":...}
//
// Java servers take no lease and are not guarded: Java Leaf reads only
// forever/.
//
// RecycleRegistry leases IDs from a pool, for servers whose address changes
// with every deploy and would otherwise run zk_normal's pool dry (Leaf#84).
// Its layout is our own; the NotFound9 fork's zk_recycle moves nodes between
// two directories non-atomically and frees IDs only after an hour:
//
//	/snowflake/{Name}/recycle/mark/{n}   PERSISTENT, the lease of ID n and its mark:
//	    {"ip","port","timestamp","holder","lease_ms","clock"}
//	/snowflake/{Name}/recycle/inuse/{n}  EPHEMERAL, {"ip","port"} of the holder
//
// The mark node is the lease: its holder field names the holder ("" once
// released), and its timestamp is the last high-water mark any holder of n
// stored; an ID whose released mark lies in the future is skipped, and the
// one taken comes with its mark as WorkerClaim.HighWater. The inuse node
// only tells newcomers that the holder's session lives, sparing them a look
// at its lease; the mark decides.
//
// Every running server of either registry also holds a live node, Meituan's
// leaf_temporary, which Java Leaf neither writes nor reads:
//
//	/snowflake/{Name}/temporary/{ip}:{port}        EPHEMERAL, Registry
//	/snowflake/{Name}/temporary/{ip}:{port}#w{id}  EPHEMERAL, RecycleRegistry
//	    data {"ip":"10.0.0.1","port":"8080","worker_id":5,"timestamp":1590000000000}
//
// The timestamp is the server's clock (Config.Now) at its last heartbeat.
// PeerClocks compares it with ZooKeeper's modification time of the node to
// measure each peer's clock against ours. The live node guards nothing: the
// lease does.
package zookeeper
