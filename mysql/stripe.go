package mysql

import "context"

// StripeSchema creates leaf_stripe beside leaf_alloc (see
// sqlstore.StripeSchema and leaf.StripeRecord): one row in a database that
// is one of several of a segment store, none otherwise. Java Leaf never
// reads it.
const StripeSchema = "CREATE TABLE IF NOT EXISTS `leaf_stripe` (\n" +
	"  `id` int(11) NOT NULL,\n" +
	"  `db_index` int(11) NOT NULL,\n" +
	"  `db_count` int(11) NOT NULL,\n" +
	"  `block` bigint(20) NOT NULL,\n" +
	"  `cluster` varchar(64) NOT NULL,\n" +
	"  `created_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,\n" +
	"  PRIMARY KEY (`id`)\n" +
	") ENGINE=InnoDB"

// OpenMember is Open for a database that is one of several of a segment
// store (package multidb): it accepts a database whose leaf_stripe says so,
// and leaves checking the record against the list of databases to the
// caller.
func OpenMember(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, false)
}
