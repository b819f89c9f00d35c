package testutil

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Programs of private registries; scripts/services.sh installs them.
const (
	zookeeperJava = "/usr/bin/java"
	zookeeperJar  = "/usr/share/java/zookeeper.jar"
	etcdServer    = "/usr/bin/etcd"
)

// registryStartTimeout bounds a start or restart of a private registry.
const registryStartTimeout = 60 * time.Second

// NewZooKeeper starts a ZooKeeper server of the test's own, standalone, on a
// free port, with its data in the test's directory (so that a Restart
// recovers its nodes and sessions, as a real restart does), and waits until
// it answers. Its Addr is the client address.
func NewZooKeeper(t testing.TB) *Server {
	t.Helper()
	needPrograms(t, zookeeperJava, zookeeperJar)
	dir := t.TempDir()
	port := FreePort(t)
	// As scripts/services.sh configures the shared one: loopback only, no
	// admin server, a 500ms tick so that sessions may be short.
	cfg := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\nminSessionTimeout=1000\nmaxSessionTimeout=30000\n4lw.commands.whitelist=ruok\n",
		filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := newServer(t, "zookeeper", addr, dir, registryStartTimeout,
		[]string{zookeeperJava, "-Xmx128m", "-Dzookeeper.log.dir=" + dir, "-Dzookeeper.root.logger=INFO,CONSOLE",
			"-cp", "/etc/zookeeper/conf:" + zookeeperJar, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg")},
		func(ctx context.Context) error { return ruok(ctx, addr) })
	ctx, cancel := context.WithTimeout(context.Background(), registryStartTimeout)
	defer cancel()
	if err := s.start(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// ruok asks a ZooKeeper server whether it serves.
func ruok(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("ruok")); err != nil {
		return err
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "imok") {
		return fmt.Errorf("ruok: %q", line)
	}
	return nil
}

// NewEtcd starts an etcd server of the test's own, a cluster of one, on
// free ports, with its data in the test's directory (so that a Restart
// recovers its keys and leases), and waits until it is healthy. Its Addr is
// the client address.
func NewEtcd(t testing.TB) *Server {
	t.Helper()
	needPrograms(t, etcdServer)
	dir := t.TempDir()
	client, peer := FreePort(t), FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	s := newServer(t, "etcd", addr, dir, registryStartTimeout,
		[]string{etcdServer, "--name", "leaf-test", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", "http://" + addr, "--advertise-client-urls", "http://" + addr,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "leaf-test=" + peerURL},
		func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("health: %s", resp.Status)
			}
			return nil
		})
	ctx, cancel := context.WithTimeout(context.Background(), registryStartTimeout)
	defer cancel()
	if err := s.start(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
