package testutil

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Galera's parts; scripts/services.sh installs them (galera-4, rsync).
const (
	galeraProvider = "/usr/lib/galera/libgalera_smm.so"
	// The script mariadbd runs for a state transfer by rsync
	// (wsrep_sst_method=rsync), on the donor and on the joiner.
	galeraSSTScript = "wsrep_sst_rsync"
)

// galeraUser is the system user a node runs as when the test runs as root
// (see MariaDBConfig.User): the joiner's rsync daemon, run by root, would
// write the copy as nobody. The mariadb-server package creates it.
const galeraUser = "mysql"

// galeraStartTimeout bounds a node's start or restart: a joiner first
// receives a full copy of a donor's data (SST), a restarted node the
// transactions it missed (IST), before it is Synced.
const galeraStartTimeout = 3 * time.Minute

// Galera is a Galera cluster of private mariadbds, for tests of stores on a
// multi-primary cluster: each node takes writes, and of two transactions
// that change one row on two nodes at once the later to certify fails with
// MySQL error 1213 (ER_LOCK_DEADLOCK), which its client must retry.
//
// Replication is synchronous in that a commit returns once every node has
// certified it, not once every node has applied it: a read on another node
// sees it for certain only with wsrep_sync_wait=1 in that session.
type Galera struct {
	nodes []*MariaDB
}

// NewGalera starts a cluster of n nodes on 127.0.0.1, each a private
// mariadbd on free ports (see NewMariaDB): node 0 bootstraps the cluster,
// the others join it one by one, each receiving node 0's data by rsync. It
// returns once all are Synced. A node's Restart after Kill9 rejoins the
// cluster and waits until it is Synced again.
//
// All nodes run on one host, which Galera allows once each has ports of
// its own: the group communication, state transfer (SST) and incremental
// state transfer (IST) ports default to 4567, 4444 and 4568 on every
// address, and are set per node here. Galera itself runs as root, but its
// state transfer by rsync does not (see galeraUser): a test run as root
// runs the nodes as mysql.
//
// A node restarted after Kill9 rejoins by a full state transfer: its
// grastate.dat records no position after a crash, and nothing runs the
// recovery (mariadbd --wsrep-recover) a service manager runs to find it.
// The copy is a few megabytes.
func NewGalera(t testing.TB, n int) *Galera {
	t.Helper()
	if n < 1 {
		t.Fatalf("testutil: a Galera cluster of %d nodes", n)
	}
	needPrograms(t, mariadbInstallDB, mariadbServer, galeraSSTScript, "rsync")
	needLibrary(t, galeraProvider)

	type ports struct{ gcomm, ist, sst int }
	nodePorts := make([]ports, n)
	members := make([]string, n)
	for i := range nodePorts {
		nodePorts[i] = ports{FreePort(t), FreePort(t), FreePort(t)}
		members[i] = fmt.Sprintf("127.0.0.1:%d", nodePorts[i].gcomm)
	}
	g := &Galera{}
	for i, p := range nodePorts {
		provider := []string{
			// Group communication (replication) on the node's own port;
			// wsrep_node_address tells the others to reach it there.
			fmt.Sprintf("gmcast.listen_addr=tcp://127.0.0.1:%d", p.gcomm),
			// Where a restarted node receives the transactions it missed.
			fmt.Sprintf("ist.recv_addr=127.0.0.1:%d", p.ist),
			// The ring buffer of recent write sets from which a donor
			// serves IST: default 128M preallocated on disk; a test's
			// writes fit in a little.
			"gcache.size=16M",
			// The group forms with Galera's default timeouts (suspect a
			// silent node after 5s, evict it after 15s): on a busy
			// machine a joiner or its donor, busy with a state transfer,
			// can go quiet for 2s, and the cluster split at start. The
			// short ones are set once every node is Synced (fastEviction).
		}
		flags := []string{
			"--wsrep-on=ON",
			"--wsrep-provider=" + galeraProvider,
			"--wsrep-cluster-name=leaftest",
			"--wsrep-cluster-address=gcomm://" + strings.Join(members, ","),
			fmt.Sprintf("--wsrep-node-name=node%d", i),
			fmt.Sprintf("--wsrep-node-address=127.0.0.1:%d", p.gcomm),
			"--wsrep-provider-options=" + strings.Join(provider, "; "),
			// A full state transfer copies the data directory with rsync
			// into the joiner's own; its rsync daemon listens here.
			"--wsrep-sst-method=rsync",
			fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", p.sst),
			// What Galera requires: row events (it replicates rows),
			// InnoDB (the only transactional engine it replicates), and
			// interleaved auto-increment locks (a table lock for each
			// INSERT would deadlock appliers running in parallel).
			"--binlog-format=ROW",
			"--default-storage-engine=InnoDB",
			"--innodb-autoinc-lock-mode=2",
		}
		o := MariaDBConfig{
			ServerID:     uint32(i + 1),
			Flags:        flags,
			Ready:        synced,
			StartTimeout: galeraStartTimeout,
			User:         galeraUser,
		}
		if i == 0 {
			// Node 0 forms a new cluster, once: restarted, it joins the
			// others like any node.
			o.FirstStartFlags = []string{"--wsrep-new-cluster"}
		}
		// One at a time: a donor serves one SST at a time, and a joiner
		// that finds none free keeps retrying.
		g.nodes = append(g.nodes, NewMariaDBWith(t, o))
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for _, m := range g.nodes {
		var opts string
		err := m.exec(ctx, fastEviction)
		if err == nil {
			err = m.queryRow(ctx, "SELECT @@wsrep_provider_options", &opts)
		}
		if err == nil && !strings.Contains(opts, "evs.suspect_timeout = PT2S") {
			err = fmt.Errorf("evs.suspect_timeout not set: %.300s", opts)
		}
		if err != nil {
			t.Fatalf("testutil: Galera node %s: shorter eviction timeouts: %v", m.Addr, err)
		}
	}
	return g
}

// fastEviction makes a formed cluster suspect a killed node after 2s and
// evict it after 3s (defaults 5s and 15s): until then the cluster holds
// every commit, and a test's load waits on it. Keepalives must come within
// a third of the suspect timeout. A node restarted by the test rejoins with
// the defaults; the survivors, which evict, keep these.
const fastEviction = "SET GLOBAL wsrep_provider_options = 'evs.keepalive_period=PT0.5S; evs.suspect_timeout=PT2S; evs.inactive_timeout=PT3S'"

// Node is node i, from 0; node 0 bootstrapped the cluster.
func (g *Galera) Node(i int) *MariaDB { return g.nodes[i] }

// Size is the number of nodes.
func (g *Galera) Size() int { return len(g.nodes) }

// CreateDatabase creates an empty database through node 0, waits until
// every node has it, and returns a DSN for it on node 0 (root); another
// node's is Node(i).DSN(name).
func (g *Galera) CreateDatabase(t testing.TB, name string) string {
	t.Helper()
	dsn := g.nodes[0].CreateDatabase(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for _, m := range g.nodes[1:] {
		// DDL is replicated in total order, but a node applies it after
		// node 0 returns.
		err := waitUntil(ctx, "database "+name+" on "+m.Addr, func(ctx context.Context) (bool, error) {
			var n int
			err := m.queryRow(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '"+name+"'", &n)
			return n == 1, err
		})
		if err != nil {
			t.Fatalf("testutil: create database %s: %v", name, err)
		}
	}
	return dsn
}

// WaitSynced waits until node i is Synced: a member of the primary
// component, with every transaction the cluster committed, serving
// queries.
func (g *Galera) WaitSynced(ctx context.Context, i int) error {
	m := g.nodes[i]
	return waitUntil(ctx, "Galera node "+m.Addr+" Synced", func(ctx context.Context) (bool, error) {
		err := synced(ctx, m)
		return err == nil, err
	})
}

// synced is a Galera node's readiness: wsrep_local_state_comment Synced.
// A node answers SHOW STATUS before it has joined or caught up, while it
// refuses other queries.
func synced(ctx context.Context, m *MariaDB) error {
	state, err := m.status(ctx, "wsrep_local_state_comment")
	if err != nil {
		return err
	}
	if state != "Synced" {
		return fmt.Errorf("Galera node %s is %s, not Synced", m.Addr, state)
	}
	return nil
}

// needLibrary is needPrograms for a library a server loads, which is a
// file, not an executable.
func needLibrary(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("testutil: %s is not installed (%v); scripts/services.sh installs it", path, err)
		if os.Getenv(EnvStrict) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}
