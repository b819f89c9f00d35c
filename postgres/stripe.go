package postgres

import "context"

// OpenMember is Open for a database that is one of several of a segment
// store (package multidb): it accepts a database whose leaf_stripe says so,
// and leaves checking the record against the list of databases to the
// caller.
func OpenMember(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, false)
}
