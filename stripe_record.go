package leaf

import (
	"errors"
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

// MaxClusterLen bounds StripeRecord.Cluster.
const MaxClusterLen = 64

// ErrStripeLayout: the databases' stripe records disagree with the list of
// databases a server was given, with each other, or with a store of one
// database (a database that is one of several opened on its own); the
// server must not issue from them.
var ErrStripeLayout = errors.New("database stripe records disagree with the configuration")

// Validate checks a record about to be written: a striped Stripe and a
// cluster of 1..MaxClusterLen bytes.
func (r StripeRecord) Validate() error {
	if err := r.Stripe.Validate(); err != nil {
		return err
	}
	if !r.Stripe.Striped() {
		return fmt.Errorf("%w: stripe record without a stripe", ErrInvalidArgument)
	}
	if r.Cluster == "" || len(r.Cluster) > MaxClusterLen {
		return fmt.Errorf("%w: cluster id of %d bytes, want 1..%d", ErrInvalidArgument, len(r.Cluster), MaxClusterLen)
	}
	return nil
}

// Same reports whether r and o record the same stripe of the same cluster
// (CreatedAt aside).
func (r StripeRecord) Same(o StripeRecord) bool {
	return r.Stripe == o.Stripe && r.Cluster == o.Cluster
}

func (r StripeRecord) String() string {
	return fmt.Sprintf("database %d of %d, blocks of %d, cluster %s", r.Stripe.Index, r.Stripe.Of, r.Stripe.Block, r.Cluster)
}
