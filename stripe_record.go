package leaf

import (
	"fmt"
	"time"
)

// StripeRecord is what one database of a segment store spread over several
// (see Stripe) records about its place, in the table leaf_stripe beside
// leaf_alloc: its stripe and the cluster it belongs to. A server checks the
// records of every database in its list against the list before it issues,
// so that a list in another order, of another length or mixing databases
// of two clusters cannot run.
type StripeRecord struct {
	Stripe Stripe
	// Cluster is chosen at random when the databases are first set up (or
	// migrated): databases of one store record the same one.
	Cluster   string
	CreatedAt time.Time // set by the database; ignored when writing
}

// MaxClusterLen bounds StripeRecord.Cluster (see stripe.ValidateRecord).
const MaxClusterLen = 64

// Same reports whether r and o record the same stripe of the same cluster
// (CreatedAt aside).
func (r StripeRecord) Same(o StripeRecord) bool {
	return r.Stripe == o.Stripe && r.Cluster == o.Cluster
}

func (r StripeRecord) String() string {
	return fmt.Sprintf("database %d of %d, blocks of %d, cluster %s", r.Stripe.Index, r.Stripe.Databases, r.Stripe.Block, r.Cluster)
}
