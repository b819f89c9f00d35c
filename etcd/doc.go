// Package etcd is a snowflake worker registry on etcd (v3 API): worker IDs
// are leased, so a server that dies gives its ID back to the pool once its
// lease expires, and containers that change address on every deploy never
// run the pool dry (Leaf#84).
//
// Keys live under {Prefix}{Name}/, Name being leaf.name:
//
//	{Prefix}{Name}/worker/{n}  the holder of worker ID n: {"ip","port","timestamp","clock"},
//	                           attached to the holder's lease; timestamp is when it
//	                           claimed n, clock its clock at its last heartbeat
//	                           (both Unix ms), which PeerClocks compares
//	{Prefix}{Name}/mark/{n}    ID n's high-water mark: {"ip","port","timestamp"},
//	                           timestamp in Unix ms; no lease, it outlives holders
//
// A claim is one transaction on the ID's own key, If(CreateRevision(worker/n)
// == 0) Then(Put(worker/n)): etcd serialises it, so racing servers never get
// one ID twice (a port that compared-and-swapped a key embedding its own
// address did). The high-water mark is read in the same transaction; an ID
// whose mark still lies in the future is skipped, and the one taken comes
// with its mark as WorkerClaim.HighWater.
//
// Renewal is explicit: Heartbeat renews the lease once (no keep-alive
// goroutine keeps a lease alive behind the generator's back) and stores the
// mark, guarded on the worker key's create revision, so a holder whose key
// expired cannot write the mark of an ID another server now holds. Release
// stores the final mark and revokes the lease, which deletes the worker key:
// the ID is free at once, protected by its mark.
//
// A second server with the same endpoint simply gets another ID: the ID
// belongs to the lease, not to the endpoint.
package etcd
