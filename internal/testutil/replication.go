package testutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// ReplicationMode is when a MariaDBPair's primary reports a commit.
type ReplicationMode int

const (
	// Async: the primary commits without waiting for the replica, which
	// may lag; what it has not received when the primary dies is lost to a
	// promotion.
	Async ReplicationMode = iota
	// SemiSync: the primary reports a commit only once the replica has the
	// transaction in its relay log (rpl_semi_sync_master_wait_point=
	// AFTER_SYNC: written to the binary log, then acknowledged, then
	// committed in InnoDB), so that a promotion loses no acknowledged write.
	// While the replica is down or does not replicate, the primary's
	// commits wait for it (semiSyncTimeout).
	SemiSync
)

func (m ReplicationMode) String() string {
	switch m {
	case Async:
		return "async"
	case SemiSync:
		return "semi-sync"
	}
	return fmt.Sprintf("ReplicationMode(%d)", int(m))
}

// Server IDs of a MariaDBPair's servers; the replica keeps its own when
// promoted, so that @@server_id tells a client which one it reached.
const (
	PrimaryServerID = 1
	ReplicaServerID = 2
)

// AppUser is the login, without a password, that MariaDBPair.CreateDatabase
// hands out: it has every privilege on every database but no global
// (administrative) one, as an application's login has, so that read_only
// binds it. root's READ_ONLY ADMIN lets it write to a read-only replica.
const AppUser = "leaf"

// semiSyncTimeout is how long a SemiSync primary waits for the replica's
// acknowledgement before it gives up and goes on asynchronously (and
// silently): longer than any test runs, so that in a test a write
// acknowledged by the primary has always reached the replica. MariaDB's
// default is 10s, which a busy machine may well exceed.
const semiSyncTimeout = 24 * time.Hour

// MariaDBPair is a primary and its replica, private mariadbds replicating
// with GTIDs, for failover tests: kill the primary, Promote the replica, and
// Switch a Proxy (the VIP the clients use) to it.
//
// Both log binary (ROW format, log_slave_updates), so that the replica,
// once promoted, is a primary with the history it applied. The replica
// runs read_only until Promote. Its replication resumes by itself when it
// is restarted, even after StopReplication, as a configured replica's does.
type MariaDBPair struct {
	Primary *MariaDB
	Replica *MariaDB
	Mode    ReplicationMode
}

// NewMariaDBPair starts a primary and a replica, each a private mariadbd on
// a free port (see NewMariaDB), and waits until the replica replicates
// (and, in SemiSync, until the primary counts it as a semi-sync replica).
// MariaDB 10.11 has semi-synchronous replication built in: no plugin is
// loaded.
func NewMariaDBPair(t testing.TB, mode ReplicationMode) *MariaDBPair {
	t.Helper()
	// A replica whose primary hangs (Stop) notices within seconds rather
	// than the default minute, and reconnects (MASTER_CONNECT_RETRY) every
	// second after the primary's restart.
	common := []string{"--log-bin=mysql-bin", "--binlog-format=ROW", "--log-slave-updates=ON",
		"--relay-log=relay-bin", "--slave-net-timeout=5"}
	primary := append([]string(nil), common...)
	replica := append(common[:len(common):len(common)], "--read-only=ON")
	switch mode {
	case Async:
	case SemiSync:
		primary = append(primary, "--rpl-semi-sync-master-enabled=ON",
			"--rpl-semi-sync-master-wait-point=AFTER_SYNC",
			fmt.Sprintf("--rpl-semi-sync-master-timeout=%d", semiSyncTimeout.Milliseconds()))
		// Not the master side: the promoted replica has no replica of its
		// own to wait for, and would hold every commit for the timeout.
		replica = append(replica, "--rpl-semi-sync-slave-enabled=ON")
	default:
		t.Fatalf("testutil: unknown %v", mode)
	}
	p := &MariaDBPair{
		Primary: NewMariaDBWith(t, MariaDBConfig{ServerID: PrimaryServerID, Flags: primary}),
		Replica: NewMariaDBWith(t, MariaDBConfig{ServerID: ReplicaServerID, Flags: replica}),
		Mode:    mode,
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := p.replicate(ctx); err != nil {
		t.Fatalf("testutil: %v mariadb pair: %v", mode, err)
	}
	return p
}

// replicate points the replica at the primary, waits until it replicates,
// and creates AppUser on the primary, whence it replicates.
func (p *MariaDBPair) replicate(ctx context.Context) error {
	_, port, err := net.SplitHostPort(p.Primary.Addr)
	if err != nil {
		return err
	}
	// The replica's GTID position is empty: it fetches the primary's whole
	// binary log, which starts after mariadb-install-db's tables.
	change := fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%s, MASTER_USER='root', "+
		"MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", port)
	if err := p.Replica.exec(ctx, change); err != nil {
		return err
	}
	if err := p.StartReplication(ctx); err != nil {
		return err
	}
	err = waitUntil(ctx, "replica "+p.Replica.Addr+" replicating", func(ctx context.Context) (bool, error) {
		st, err := replicaStatus(ctx, p.Replica)
		if err != nil || st == nil {
			return false, err
		}
		if st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
			return true, nil
		}
		return false, fmt.Errorf("IO thread %s (%s), SQL thread %s (%s)",
			st["Slave_IO_Running"], st["Last_IO_Error"], st["Slave_SQL_Running"], st["Last_SQL_Error"])
	})
	if err != nil {
		return err
	}
	if p.Mode == SemiSync {
		// A SemiSync primary's commits wait for a semi-sync replica
		// (rpl_semi_sync_master_wait_no_slave), even before the first one
		// has connected: the first write waits for its handshake.
		err := waitUntil(ctx, "primary "+p.Primary.Addr+" counting a semi-sync replica", func(ctx context.Context) (bool, error) {
			n, err := p.Primary.status(ctx, "Rpl_semi_sync_master_clients")
			return n != "" && n != "0", err
		})
		if err != nil {
			return err
		}
	}
	for _, q := range []string{
		"CREATE USER '" + AppUser + "'@'127.0.0.1'",
		"GRANT ALL PRIVILEGES ON `%`.* TO '" + AppUser + "'@'127.0.0.1'",
	} {
		if err := p.Primary.exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return p.WaitCaughtUp(ctx)
}

// CreateDatabase creates an empty database on the primary, waits until the
// replica has it, and returns a DSN for it on the primary as AppUser (whom
// read_only binds): Replica.DSNAs(AppUser, name) is the replica's.
func (p *MariaDBPair) CreateDatabase(t testing.TB, name string) string {
	t.Helper()
	p.Primary.CreateDatabase(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := p.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("testutil: create database %s: %v", name, err)
	}
	return p.Primary.DSNAs(AppUser, name)
}

// StopReplication stops the replica's replication (STOP SLAVE): what the
// primary commits from now on never reaches it, until StartReplication.
// On a SemiSync pair the primary's commits then wait for a replica,
// practically for ever (semiSyncTimeout): the lossy case is an Async pair's.
func (p *MariaDBPair) StopReplication(ctx context.Context) error {
	return p.Replica.exec(ctx, "STOP SLAVE")
}

// StartReplication resumes the replica's replication (START SLAVE) where it
// stopped.
func (p *MariaDBPair) StartReplication(ctx context.Context) error {
	return p.Replica.exec(ctx, "START SLAVE")
}

// WaitCaughtUp waits until the replica has applied everything the primary
// has committed: until its @@gtid_slave_pos reaches the primary's
// @@gtid_binlog_pos of the call. It fails at once when the replica does not
// replicate (StopReplication, or an error of its SQL thread), and when the
// primary does not answer.
func (p *MariaDBPair) WaitCaughtUp(ctx context.Context) error {
	var pos string
	if err := p.Primary.queryRow(ctx, "SELECT @@gtid_binlog_pos", &pos); err != nil {
		return fmt.Errorf("primary %s: %w", p.Primary.Addr, err)
	}
	return waitUntil(ctx, "replica "+p.Replica.Addr+" at the primary's GTID "+pos, func(ctx context.Context) (bool, error) {
		// MASTER_GTID_WAIT compares with @@gtid_slave_pos domain by domain;
		// with no timeout to wait for, 0 means reached and -1 not yet.
		var reached int
		if err := p.Replica.queryRow(ctx, "SELECT MASTER_GTID_WAIT('"+pos+"', 0)", &reached); err != nil {
			return false, err
		}
		if reached == 0 {
			return true, nil
		}
		st, err := replicaStatus(ctx, p.Replica)
		switch {
		case err != nil:
			return false, err
		case st == nil:
			return false, permanent(errors.New("the replica has no primary (promoted?)"))
		case st["Slave_SQL_Running"] != "Yes" || st["Slave_IO_Running"] == "No":
			return false, permanent(fmt.Errorf("the replica does not replicate: IO thread %s (%s), SQL thread %s (%s)",
				st["Slave_IO_Running"], st["Last_IO_Error"], st["Slave_SQL_Running"], st["Last_SQL_Error"]))
		}
		return false, fmt.Errorf("at %s (IO thread %s: %s)", st["Gtid_IO_Pos"], st["Slave_IO_Running"], st["Last_IO_Error"])
	})
}

// Promote makes the replica a primary, as a failover does: it stops
// fetching from the primary, applies what its relay log holds, forgets the
// primary (STOP SLAVE; RESET SLAVE ALL) and becomes writable (read_only
// OFF). The primary is left alone; kill it first for a failover.
//
// Applying the relay log first matters to SemiSync: the writes the primary
// acknowledged are certainly in the relay log, not certainly applied, and
// RESET SLAVE ALL deletes the relay log.
func (p *MariaDBPair) Promote(ctx context.Context) error {
	r := p.Replica
	for _, q := range []string{"STOP SLAVE IO_THREAD", "START SLAVE SQL_THREAD"} {
		if err := r.exec(ctx, q); err != nil {
			return fmt.Errorf("promote %s: %s: %w", r.Addr, q, err)
		}
	}
	err := waitUntil(ctx, "replica "+r.Addr+" applying its relay log", func(ctx context.Context) (bool, error) {
		st, err := replicaStatus(ctx, r)
		switch {
		case err != nil:
			return false, err
		case st == nil:
			return true, nil // promoted already: no relay log
		case st["Last_SQL_Errno"] != "0":
			return false, permanent(fmt.Errorf("SQL thread: %s", st["Last_SQL_Error"]))
		}
		// The SQL thread's state once it has executed the last event of
		// the relay log (a transaction cut off by the primary's death
		// included: it waits for the rest, which never comes, and is not
		// applied).
		state := st["Slave_SQL_Running_State"]
		return strings.HasPrefix(state, "Slave has read all relay log"), fmt.Errorf("SQL thread: %q", state)
	})
	if err != nil {
		return fmt.Errorf("promote %s: %w", r.Addr, err)
	}
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"} {
		if err := r.exec(ctx, q); err != nil {
			return fmt.Errorf("promote %s: %s: %w", r.Addr, q, err)
		}
	}
	return nil
}

// replicaStatus is SHOW SLAVE STATUS by column name, nil on a server that
// replicates from no primary.
func replicaStatus(ctx context.Context, m *MariaDB) (map[string]string, error) {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	st := make(map[string]string, len(cols))
	for i, c := range cols {
		st[c] = vals[i].String
	}
	return st, rows.Err()
}

// permanentError is a failure that waitUntil does not wait out.
type permanentError struct{ error }

func permanent(err error) error { return permanentError{err} }

// waitUntil polls done until it reports true, ctx ends or it fails with a
// permanent error. Its other errors are taken as passing (a server still
// starting or catching up): the last one goes into the error returned when
// ctx ends first.
func waitUntil(ctx context.Context, what string, done func(context.Context) (bool, error)) error {
	var last error
	for {
		ok, err := done(ctx)
		if ok {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("waiting for %s: %w", what, perm.error)
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
