package zookeeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/leafgo/leaf"
)

// maxPeers bounds PeerClocks' listing: more live servers than the default
// layout has worker IDs (10 bits) is not a cluster PeerClocks was made for.
const maxPeers = 1024

// peerReads is how many peer nodes PeerClocks reads at once: the client
// pipelines concurrent requests, so a large cluster costs a few round trips
// rather than one per peer.
const peerReads = 16

// live is the data of a node under /snowflake/{Name}/temporary: who holds it
// and the holder's clock at its last write. Java Leaf never reads this
// directory, so the record is ours; port is a string, as in the forever
// nodes.
type live struct {
	IP        string `json:"ip"`
	Port      string `json:"port"`
	WorkerID  int64  `json:"worker_id"`
	Timestamp int64  `json:"timestamp"`
}

func encodeLive(ep leaf.Endpoint, workerID, ts int64) []byte {
	b, _ := json.Marshal(live{IP: ep.IP, Port: strconv.Itoa(ep.Port), WorkerID: workerID, Timestamp: ts})
	return b
}

// parseLive reads a live record leniently (a numeric port, no worker ID):
// only the timestamp is needed. The endpoint is "" when the record names
// none.
func parseLive(data []byte) (endpoint string, workerID, ts int64, err error) {
	var l struct {
		IP        *string         `json:"ip"`
		Port      json.RawMessage `json:"port"`
		WorkerID  *int64          `json:"worker_id"`
		Timestamp *int64          `json:"timestamp"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return "", 0, 0, err
	}
	if l.Timestamp == nil {
		return "", 0, 0, errors.New("no timestamp")
	}
	workerID = -1
	if l.WorkerID != nil {
		workerID = *l.WorkerID
	}
	if l.IP != nil && len(l.Port) > 0 {
		port := strings.Trim(string(l.Port), `"`)
		if ep, err := leaf.ParseEndpoint(*l.IP + ":" + port); err == nil {
			endpoint = ep.String()
		}
	}
	return endpoint, workerID, *l.Timestamp, nil
}

// livePath is the node under the temporary directory with the given name.
func (c *client) livePath(name string) string { return c.liveDir + "/" + name }

// createLive creates the ephemeral node p with data, and the temporary
// directory if it is missing (a tree of Java Leaf's has none), and returns
// the node's Stat.
func (c *client) createLive(p string, data []byte) (*zk.Stat, error) {
	_, err := c.conn.Create(p, data, zk.FlagEphemeral, openACL)
	if errors.Is(err, zk.ErrNoNode) {
		if err = c.ensurePath(c.liveDir); err != nil {
			return nil, err
		}
		_, err = c.conn.Create(p, data, zk.FlagEphemeral, openACL)
	}
	if err != nil {
		return nil, err
	}
	ok, st, err := c.conn.Exists(p)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, zk.ErrNoNode
	}
	return st, nil
}

// writeLive writes data (which carries our clock's reading ts) into our
// ephemeral node p, creating it if it is missing, and returns ts with the
// node's Stat after the write. The caller holds the lease the node
// advertises: another session's node of the same name is a stale one of a
// previous holder, and is replaced.
func (c *client) writeLive(p string, ts int64, data []byte) (int64, *zk.Stat, error) {
	for attempt := 1; ; attempt++ {
		ok, st, err := c.conn.Exists(p)
		if err != nil {
			return 0, nil, fmt.Errorf("zookeeper: check the live node %s: %w", p, err)
		}
		switch {
		case !ok:
			st, err = c.createLive(p, data)
		case st.EphemeralOwner != c.conn.SessionID():
			err = c.conn.Delete(p, st.Version)
			if err == nil {
				err = zk.ErrNoNode // deleted: go round to create ours
			}
		default:
			st, err = c.conn.Set(p, data, st.Version)
		}
		switch {
		case (errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion)) && attempt < 3:
			continue
		case err != nil:
			return 0, nil, fmt.Errorf("zookeeper: write the live node %s: %w", p, err)
		}
		return ts, st, nil
	}
}

// liveNode is the live node a registered server keeps: its path, "" while
// none is known to exist.
type liveNode struct {
	c    *client
	path string
}

// refresh writes our clock's reading into the live node name, for ep and
// worker id, creating it if it is missing (a previous one of another name
// goes), and returns the reading with the node's Stat after the write.
func (n *liveNode) refresh(name string, ep leaf.Endpoint, id int64) (int64, *zk.Stat, error) {
	p := n.c.livePath(name)
	if n.path != "" && n.path != p {
		n.drop()
	}
	now := n.c.now()
	ts, st, err := n.c.writeLive(p, now, encodeLive(ep, id, now))
	if err != nil {
		return 0, nil, err
	}
	n.path = p
	return ts, st, nil
}

// drop deletes the live node. If ZooKeeper does not answer, the node goes
// with the session, and PeerClocks skips it meanwhile.
func (n *liveNode) drop() {
	if n.path == "" {
		return
	}
	if err := n.c.deleteLive(n.path); err != nil {
		n.c.log.Debug("could not delete our live node", "node", n.path, "err", err)
	}
	n.path = ""
}

// deleteLive deletes our ephemeral node p if this session owns it; a node
// of another session is not ours to delete.
func (c *client) deleteLive(p string) error {
	ok, st, err := c.conn.Exists(p)
	if err != nil {
		return err
	}
	if !ok || st.EphemeralOwner != c.conn.SessionID() {
		return nil
	}
	if err := c.conn.Delete(p, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
		return err
	}
	return nil
}

// peerClocks lists the live nodes other than self and measures each
// holder's clock against ours. self is our node, just written with our
// clock's reading ts; st is the Stat that write returned.
//
// ZooKeeper's own clock is the reference: a node's Mtime is the leader's
// clock when it applied the node's last write, and the data holds the
// writer's clock when it sent it, so data.timestamp − Mtime is the writer's
// offset from ZooKeeper however long ago it wrote. Our offset is measured the
// same way, by our own write just before, and the difference of the two is
// the peer's clock minus ours, give or take the two writes' latencies. An
// ensemble whose leader changed between the writes measures against two
// clocks; ZooKeeper servers are expected to run NTP.
func (c *client) peerClocks(self string, ts int64, st *zk.Stat) ([]leaf.PeerClock, error) {
	ourOffset := ts - st.Mtime
	names, _, err := c.conn.Children(c.liveDir)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: list %s: %w", c.liveDir, err)
	}
	slices.Sort(names)
	names = slices.DeleteFunc(names, func(n string) bool { return c.livePath(n) == self })
	session := c.conn.SessionID()
	if len(names) > maxPeers {
		c.log.Warn("more live nodes than PeerClocks reads; the rest are not compared",
			"dir", c.liveDir, "nodes", len(names), "read", maxPeers)
		names = names[:maxPeers]
	}

	peers := make([]*leaf.PeerClock, len(names))
	errs := make([]error, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(peerReads, len(names)) {
		wg.Go(func() {
			for i := range next {
				p := c.livePath(names[i])
				data, st, err := c.conn.Get(p)
				switch {
				case errors.Is(err, zk.ErrNoNode):
					continue // the peer stopped meanwhile
				case err != nil:
					errs[i] = fmt.Errorf("zookeeper: read %s: %w", p, err)
					continue
				}
				if st.EphemeralOwner == session {
					continue // ours: one a failed delete left behind
				}
				ep, id, ts, err := parseLive(data)
				if err != nil {
					c.log.Debug("live node not understood; skipped", "node", p, "data", truncate(string(data), 80), "err", err)
					continue
				}
				if ep == "" {
					ep = names[i]
				}
				offset := ts - st.Mtime - ourOffset
				peers[i] = &leaf.PeerClock{Endpoint: ep, WorkerID: id, Offset: time.Duration(offset) * time.Millisecond}
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first: the others are likely the same
		}
	}
	out := make([]leaf.PeerClock, 0, len(names))
	for _, p := range peers {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out, nil
}
