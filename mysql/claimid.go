package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/leafgo/leaf"
)

// The statements of RegisterID on leaf_workerid_alloc. A row claimed by ID
// has idKey(id) for ip_port, which no endpoint can be, and no ip or port:
// its servers move, the ID stays.
const (
	selectWorkerByID = "SELECT ip_port, max_timestamp FROM leaf_workerid_alloc WHERE id = ?"
	insertWorkerID   = "INSERT INTO leaf_workerid_alloc (id, ip_port, ip, port, max_timestamp, create_time, update_time) VALUES (?, ?, NULL, NULL, NULL, ?, ?)"
	// The id is AUTO_INCREMENT, to which an inserted 0 means "the next
	// value" unless the session says otherwise.
	selectSQLMode  = "SELECT @@SESSION.sql_mode"
	allowZeroID    = "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_AUTO_VALUE_ON_ZERO')"
	restoreSQLMode = "SET SESSION sql_mode = ?"
)

// idKey is the ip_port of the row of a worker ID claimed by number.
func idKey(id int64) string { return "worker-id/" + strconv.FormatInt(id, 10) }

// RegisterID claims worker ID id itself, for a server whose ID is fixed by
// its identity (package ordinal: a StatefulSet pod's ordinal). The ID's row
// in leaf_workerid_alloc has id = id and ip_port "worker-id/ID", inserted if
// missing, so that its high-water mark (max_timestamp) stays with the ID
// whichever host runs it, and IDs claimed by endpoint and by number share
// one space: an ID that is an endpoint's row (the mysql registry's or Java
// Leaf's, never recycled) is refused, and the AUTO_INCREMENT moves past
// the IDs claimed by number.
//
// The lease in leaf_workerid_lease is taken as Register takes it, waiting
// up to ClaimWait (or ctx) for another holder's to lapse and then failing
// with an error wrapping leaf.ErrWorkerInUse; the claim lasts as long as the
// lease, as Register's does. HighWater is the row's max_timestamp, 0 for a
// new row.
func (r *WorkerRegistry) RegisterID(ctx context.Context, ep leaf.Endpoint, id int64) (leaf.WorkerClaim, error) {
	if err := ep.Validate(); err != nil {
		return leaf.WorkerClaim{}, fmt.Errorf("mysql: register worker ID: %w", err)
	}
	if id < 0 {
		return leaf.WorkerClaim{}, fmt.Errorf("mysql: register worker ID: %w: worker ID %d is negative", leaf.ErrInvalidArgument, id)
	}
	key := idKey(id)
	for attempt := 1; ; attempt++ {
		if err := r.ensureIDRow(ctx, id, key); err != nil {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register worker %d in %s: %w", id, r.dbName, err)
		}
		t0, resumed, err := r.claimLease(ctx, id, ep.String(), true)
		if err != nil {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register worker %d: %w", id, err)
		}
		// Read once no one else may move the mark, as Register does.
		var (
			got  string
			mark sql.NullInt64
		)
		err = r.db.QueryRowContext(ctx, selectWorkerByID, id).Scan(&got, &mark)
		if err == nil && got == key {
			r.hold(id, key, true)
			return leaf.WorkerClaim{WorkerID: id, HighWater: mark.Int64, Expires: t0.Add(r.ttl), Resumed: resumed}, nil
		}
		// Deleted or handed to an endpoint meanwhile (an operator's doing).
		r.dropLease(ctx, id)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register worker %d in %s: look up worker: %w", id, r.dbName, err)
		}
		if attempt == registerAttempts {
			return leaf.WorkerClaim{}, fmt.Errorf("mysql: register worker %d in %s: its row in leaf_workerid_alloc keeps changing", id, r.dbName)
		}
	}
}

// ensureIDRow makes sure leaf_workerid_alloc has the row of worker id
// claimed by number (ip_port key), inserting it if there is none. A row of
// the ID that is an endpoint's fails with leaf.ErrWorkerInUse.
func (r *WorkerRegistry) ensureIDRow(ctx context.Context, id int64, key string) error {
	for attempt := 1; ; attempt++ {
		var (
			ipPort string
			mark   sql.NullInt64
		)
		err := r.db.QueryRowContext(ctx, selectWorkerByID, id).Scan(&ipPort, &mark)
		switch {
		case err == nil && ipPort == key:
			return nil
		case err == nil:
			return fmt.Errorf("%w: worker ID %d belongs to the endpoint %q in leaf_workerid_alloc (a server registered by endpoint, Go or Java, whose ID is never given to another): choose IDs that no endpoint has, e.g. with an offset above the table's highest id",
				leaf.ErrWorkerInUse, id, ipPort)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("look up worker: %w", err)
		}
		err = r.insertID(ctx, id, key)
		if err == nil {
			return nil
		}
		// A duplicate: another server inserted the row first; look again.
		if attempt == registerAttempts || !(dialect.IsUniqueViolation(err) || dialect.IsRetryable(err)) {
			return fmt.Errorf("insert worker: %w", err)
		}
	}
}

// insertID inserts the row of worker id claimed by number. ID 0 needs
// NO_AUTO_VALUE_ON_ZERO, set on a connection of its own and reset before
// the connection goes back to the pool.
func (r *WorkerRegistry) insertID(ctx context.Context, id int64, key string) error {
	stamp := time.Now().Truncate(time.Second)
	if id != 0 {
		_, err := r.db.ExecContext(ctx, insertWorkerID, id, key, stamp, stamp)
		return err
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mode string
	if err := conn.QueryRowContext(ctx, selectSQLMode).Scan(&mode); err != nil {
		return fmt.Errorf("read sql_mode: %w", err)
	}
	if _, err := conn.ExecContext(ctx, allowZeroID); err != nil {
		return fmt.Errorf("set NO_AUTO_VALUE_ON_ZERO: %w", err)
	}
	_, err = conn.ExecContext(ctx, insertWorkerID, id, key, stamp, stamp)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), restoreSQLMode, mode); rerr != nil {
		// A connection left in another mode must not serve anyone else.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}
