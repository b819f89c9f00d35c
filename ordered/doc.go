// Package ordered serves ordered tags: tags whose IDs strictly increase in
// the order they are issued, across a cluster of segment servers. One
// server at a time, the tag's owner, issues them under a lease kept in
// the store (leaf.OrderedStore); the others answer *leaf.NotOwnerError
// and forward to the owner (package ordered/forward).
//
// The package is a tag kind of the segment generator, built on its
// extension point (segment.Kinds): the generator knows nothing of owners.
// Tags are given to a generator in segment.Config.Kinds (or both are
// started by NewGenerator); at a tag's first load the generator asks
// Tags.Find, which reads the tag's lease and, for an ordered tag, answers
// its state. From then on the state issues the tag's IDs, from buffers the
// generator builds for it (segment.Buffer.NewBuffer), each reserving its
// ranges fenced by the lease's token (ReserveOwned), so that an owner that
// lost its lease reserves nothing more, whatever its clock says. Leases
// are taken (ordered.go), renewed in batches (renew.go) and released at
// Close; ordered.go says why the order holds across owners.
package ordered
