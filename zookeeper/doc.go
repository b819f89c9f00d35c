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
// RecycleRegistry leases IDs, for servers whose address changes with every
// deploy and would otherwise run zk_normal's pool dry (Leaf#84). Its layout
// is our own; the NotFound9 fork's zk_recycle moves nodes between two
// directories non-atomically and frees IDs only after an hour:
//
//	/snowflake/{Name}/recycle/inuse/{n}  EPHEMERAL, {"ip","port"} of the holder
//	/snowflake/{Name}/recycle/mark/{n}   PERSISTENT, {"ip","port","timestamp"}
//
// The ephemeral node is the lease: it lives as long as the holder's session,
// and creating it is the atomic claim. The mark is the last high-water mark
// any holder of n stored; an ID whose mark lies in the future is skipped, and
// the one taken comes with its mark as WorkerClaim.HighWater. Every write of
// a mark compares and sets its version, and every renewal checks that the
// ephemeral node is still owned by the holder's session, so a holder whose
// session expired (go-zookeeper quietly opens a new one) learns that it lost
// the ID instead of writing over its successor's mark.
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
// measure each peer's clock against ours. Registry's node is also a guard: it
// is named by the endpoint alone, so a second server given the same endpoint
// (a copied configuration, a pinned port, a cloned VM), which would take the
// same worker ID, finds it held and fails with leaf.ErrWorkerInUse, after
// waiting out the session timeout in case the holder is this server's own
// previous run, killed. Java servers take no live node and are not guarded.
// The guard catches mistakes; it is not a lease (the ID is the endpoint's):
// a server whose session expires keeps issuing, and if another server with
// its endpoint claimed the node meanwhile it learns so at its next
// heartbeat, with leaf.ErrWorkerLost. RecycleRegistry's leases already give
// two servers with one endpoint two IDs, so its live node carries the ID in
// its name and guards nothing.
package zookeeper
