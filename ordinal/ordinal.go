// Package ordinal takes a snowflake worker ID from a Kubernetes StatefulSet
// pod's ordinal: the pod leaf-3 is worker 3 (plus a configured offset), as
// CosId's StatefulSet distributor does. The ID needs no pool to be drawn
// from, but it is still claimed: Registry holds it in a registry that refuses
// a second live holder of the same ID (leaf.ErrWorkerInUse), so that two
// StatefulSets of one name in two namespaces sharing the registry, or a pod's
// configuration copied to another host, are refused instead of issuing the
// same IDs.
//
// A StatefulSet names its pods NAME-0, NAME-1, ... (the ordinal in decimal,
// without leading zeros), and a pod's host name is its name. Parse reads the
// ordinal from such a name; a host name that is a fully qualified one
// (setHostnameAsFQDN) counts by its first label.
package ordinal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
)

// maxDigits bounds the ordinal's length: Kubernetes ordinals are int32, so
// ten digits, and a longer run is no pod name.
const maxDigits = 10

// Parse returns the ordinal of a StatefulSet pod name, NAME-N: N in decimal,
// "0" or without leading zeros, after a "-" that follows a non-empty NAME.
// Everything after the first "." is ignored (a fully qualified host name).
// Anything else fails with an error wrapping leaf.ErrInvalidArgument that
// says what is wrong with the name.
func Parse(name string) (int64, error) {
	label, _, _ := strings.Cut(name, ".")
	bad := func(why string) error {
		return fmt.Errorf("%w: host name %q is not a StatefulSet pod name NAME-ORDINAL (like leaf-3): %s",
			leaf.ErrInvalidArgument, truncate(name, 80), why)
	}
	if label == "" {
		return 0, bad("it is empty")
	}
	i := strings.LastIndexByte(label, '-')
	if i < 0 {
		return 0, bad(`it has no "-ORDINAL" at the end`)
	}
	prefix, digits := label[:i], label[i+1:]
	switch {
	case digits == "":
		return 0, bad(`nothing follows its last "-"`)
	case strings.Trim(digits, "0123456789") != "":
		return 0, bad(fmt.Sprintf("%q after its last \"-\" is not a decimal number", truncate(digits, 20)))
	case prefix == "":
		return 0, bad(`nothing comes before "-"`)
	case strings.HasSuffix(prefix, "-"):
		return 0, bad(`the name before "-ORDINAL" ends with "-", as no StatefulSet name does (a negative ordinal?)`)
	case len(digits) > 1 && digits[0] == '0':
		return 0, bad(fmt.Sprintf("the ordinal %q has a leading zero, which Kubernetes never writes", digits))
	case len(digits) > maxDigits:
		return 0, bad(fmt.Sprintf("the ordinal %s is longer than any Kubernetes ordinal (%d digits at most)", truncate(digits, 20), maxDigits))
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil { // unreachable with at most 10 digits; kept for safety
		return 0, bad(err.Error())
	}
	return n, nil
}

// WorkerID is the worker ID of the pod name: its ordinal plus offset, which
// must lie in [0, maxID] (a layout's MaxWorkerID). Errors wrap
// leaf.ErrInvalidArgument: the name, the offset or the layout must change.
func WorkerID(name string, offset, maxID int64) (int64, error) {
	if offset < 0 || offset > maxID {
		return 0, fmt.Errorf("%w: ordinal offset %d is outside the layout's worker IDs 0..%d", leaf.ErrInvalidArgument, offset, maxID)
	}
	n, err := Parse(name)
	if err != nil {
		return 0, err
	}
	if n > maxID-offset {
		return 0, fmt.Errorf("%w: host name %q: ordinal %d + offset %d = worker ID %d, above the layout's maximum %d "+
			"(fewer replicas, a smaller offset, or more snowflake.worker_bits)",
			leaf.ErrInvalidArgument, truncate(name, 80), n, offset, n+offset, maxID)
	}
	return n + offset, nil
}

// Claimer is a registry that can claim one given worker ID, refusing with
// leaf.ErrWorkerInUse while another live server holds it: the etcd and mysql
// registries (their RegisterID).
type Claimer interface {
	RegisterID(ctx context.Context, ep leaf.Endpoint, id int64) (leaf.WorkerClaim, error)
	Heartbeat(ctx context.Context, mark int64) (time.Time, error)
	Release(ctx context.Context, mark int64) error
	Close() error
}

// Registry is a leaf.WorkerRegistry whose worker ID is fixed, the pod's
// ordinal plus an offset, and claimed in a Claimer with its lease,
// heartbeat and high-water mark.
type Registry struct {
	id    int64
	claim Claimer
}

// New returns a Registry that claims worker ID id in c. Close closes c.
func New(c Claimer, id int64) (*Registry, error) {
	if id < 0 {
		return nil, fmt.Errorf("%w: worker ID %d is negative", leaf.ErrInvalidArgument, id)
	}
	return &Registry{id: id, claim: c}, nil
}

// WorkerID is the ID the registry claims.
func (r *Registry) WorkerID() int64 { return r.id }

// Register claims the registry's worker ID for ep. An ID above maxID fails
// with leaf.ErrWorkerIDsExhausted, as other registries fail when the layout
// has no room for them.
func (r *Registry) Register(ctx context.Context, ep leaf.Endpoint, maxID int64) (leaf.WorkerClaim, error) {
	if err := leaf.ValidateRegistration(ep, maxID); err != nil {
		return leaf.WorkerClaim{}, err
	}
	if r.id > maxID {
		return leaf.WorkerClaim{}, fmt.Errorf("%w: ordinal worker ID %d is above the layout's maximum %d",
			leaf.ErrWorkerIDsExhausted, r.id, maxID)
	}
	return r.claim.RegisterID(ctx, ep, r.id)
}

// Heartbeat renews the claim and stores mark.
func (r *Registry) Heartbeat(ctx context.Context, mark int64) (time.Time, error) {
	return r.claim.Heartbeat(ctx, mark)
}

// Release stores mark and gives the claim up.
func (r *Registry) Release(ctx context.Context, mark int64) error {
	return r.claim.Release(ctx, mark)
}

// Close closes the claimer.
func (r *Registry) Close() error { return r.claim.Close() }

// PeerClocks lists the other live servers' clocks where the claimer can;
// otherwise it fails with errors.ErrUnsupported, which the generator reads
// as "no peer check here".
func (r *Registry) PeerClocks(ctx context.Context) ([]leaf.PeerClock, error) {
	pr, ok := r.claim.(interface {
		PeerClocks(context.Context) ([]leaf.PeerClock, error)
	})
	if !ok {
		return nil, fmt.Errorf("%T lists no peers: %w", r.claim, errors.ErrUnsupported)
	}
	return pr.PeerClocks(ctx)
}

var _ leaf.WorkerRegistry = (*Registry)(nil)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
