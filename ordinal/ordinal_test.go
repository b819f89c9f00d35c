package ordinal_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/etcd"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/leaftest"
	"github.com/leafgo/leaf/mysql"
	"github.com/leafgo/leaf/ordinal"
	"github.com/leafgo/leaf/snowflake"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name string
		want int64
		err  string // substring of the error; "" for success
	}{
		{"leaf-0", 0, ""},
		{"leaf-12", 12, ""},
		{"my-app-3", 3, ""},
		{"leaf-1023", 1023, ""},
		{"leaf-7.leaf-pods.default.svc.cluster.local", 7, ""},
		{"leaf-2147483647", 2147483647, ""},
		{"leaf", 0, `no "-ORDINAL" at the end`},
		{"leaf-", 0, `nothing follows its last "-"`},
		{"leaf-x", 0, `"x" after its last "-" is not a decimal number`},
		{"leaf-3x", 0, `"3x" after its last "-" is not a decimal number`},
		{"leaf-+3", 0, "not a decimal number"},
		{"leaf--3", 0, `ends with "-"`},
		{"leaf-03", 0, `the ordinal "03" has a leading zero`},
		{"leaf-00", 0, "leading zero"},
		{"-3", 0, `nothing comes before "-"`},
		{"", 0, "it is empty"},
		{".leaf-3", 0, "it is empty"},
		{"leaf-99999999999", 0, "longer than any Kubernetes ordinal"},
		{"leaf-99999999999999999999999", 0, "longer than any Kubernetes ordinal"},
		{"leaf-3.", 3, ""},
		{"leaf-٣", 0, "not a decimal number"}, // an Arabic-Indic digit
	} {
		got, err := ordinal.Parse(tt.name)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.name, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, leaf.ErrInvalidArgument)):
			t.Errorf("Parse(%q) = %d, %v; want ErrInvalidArgument saying %q", tt.name, got, err, tt.err)
		case err != nil && !strings.Contains(err.Error(), "NAME-ORDINAL"):
			t.Errorf("Parse(%q): %v does not say what a pod name looks like", tt.name, err)
		}
	}
}

func TestWorkerID(t *testing.T) {
	for _, tt := range []struct {
		name          string
		offset, maxID int64
		want          int64
		err           string
	}{
		{"leaf-0", 0, 1023, 0, ""},
		{"leaf-12", 100, 1023, 112, ""},
		{"leaf-1023", 0, 1023, 1023, ""},
		{"leaf-1000", 23, 1023, 1023, ""},
		{"leaf-1001", 23, 1023, 0, "ordinal 1001 + offset 23 = worker ID 1024, above the layout's maximum 1023"},
		{"leaf-1024", 0, 1023, 0, "worker ID 1024, above the layout's maximum 1023"},
		{"leaf-2147483647", 0, 1023, 0, "above the layout's maximum"},
		{"leaf-2147483647", 1023, 1023, 0, "above the layout's maximum"},
		{"leaf-1", 0, 0, 0, "above the layout's maximum 0"},
		{"leaf-0", 0, 0, 0, ""},
		{"leaf-0", 1024, 1023, 0, "offset 1024 is outside the layout's worker IDs 0..1023"},
		{"leaf-0", -1, 1023, 0, "offset -1 is outside"},
		{"leaf", 0, 1023, 0, "not a StatefulSet pod name"},
	} {
		got, err := ordinal.WorkerID(tt.name, tt.offset, tt.maxID)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("WorkerID(%q, %d, %d) = %d, %v; want %d", tt.name, tt.offset, tt.maxID, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, leaf.ErrInvalidArgument)):
			t.Errorf("WorkerID(%q, %d, %d) = %d, %v; want ErrInvalidArgument saying %q", tt.name, tt.offset, tt.maxID, got, err, tt.err)
		}
	}
}

// etcdOpener opens ordinal registries claiming worker id in a fresh etcd
// namespace, removed when the test ends.
func etcdOpener(t *testing.T) func(id int64) leaftest.RegistryOpener {
	t.Helper()
	addr := testutil.Etcd(t)
	cfg := etcd.Config{Endpoints: []string{addr}, Prefix: "/leaftest/ordinal/", Name: testutil.UniqueName(), TTL: 2 * time.Second, Logger: testutil.Logger()}
	t.Cleanup(func() {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Errorf("etcd client: %v", err)
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Delete(ctx, cfg.Prefix+cfg.Name+"/", clientv3.WithPrefix()); err != nil {
			t.Errorf("delete test keys: %v", err)
		}
	})
	return func(id int64) leaftest.RegistryOpener {
		return func(ctx context.Context) (leaf.WorkerRegistry, error) {
			c, err := etcd.Open(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return ordinal.New(c, id)
		}
	}
}

// mysqlOpener is etcdOpener on a fresh MySQL database.
func mysqlOpener(t *testing.T) func(id int64) leaftest.RegistryOpener {
	t.Helper()
	wc := mysql.WorkerConfig{DSN: testutil.MySQL(t), LeaseTTL: mysql.MinLeaseTTL, Logger: testutil.Logger()}
	return func(id int64) leaftest.RegistryOpener {
		return func(ctx context.Context) (leaf.WorkerRegistry, error) {
			c, err := mysql.OpenWorkerRegistryWithConfig(ctx, wc)
			if err != nil {
				return nil, err
			}
			return ordinal.New(c, id)
		}
	}
}

func open(t *testing.T, o leaftest.RegistryOpener) leaf.WorkerRegistry {
	t.Helper()
	r, err := o(testutil.Context(t, 10*time.Second))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestRegistry: through the ordinal registry, the pod's worker ID is the one
// claimed, refused while another server holds it, refused above the layout,
// and the claimer's peer listing is passed on.
func TestRegistry(t *testing.T) {
	for name, opener := range map[string]func(*testing.T) func(int64) leaftest.RegistryOpener{"etcd": etcdOpener, "mysql": mysqlOpener} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := opener(t)
			a, b := open(t, o(3)), open(t, o(3))
			c, err := a.Register(testutil.Context(t, 10*time.Second), leaftest.TestEndpoint(0), 1023)
			if err != nil || c.WorkerID != 3 || c.Expires.IsZero() {
				t.Fatalf("A: Register = %+v, %v; want worker 3 with an expiry", c, err)
			}
			if _, err := b.Register(testutil.Context(t, 500*time.Millisecond), leaftest.TestEndpoint(1), 1023); !errors.Is(err, leaf.ErrWorkerInUse) {
				t.Fatalf("B: Register while A holds worker 3 = %v, want ErrWorkerInUse", err)
			}
			if _, err := open(t, o(3)).Register(testutil.Context(t, 10*time.Second), leaftest.TestEndpoint(2), 2); !errors.Is(err, leaf.ErrWorkerIDsExhausted) {
				t.Fatalf("Register of worker 3 in a layout of 0..2 = %v, want ErrWorkerIDsExhausted", err)
			}
			pr, ok := a.(snowflake.PeerClockReader)
			if !ok {
				t.Fatalf("%T is no PeerClockReader", a)
			}
			if _, err := pr.PeerClocks(testutil.Context(t, 10*time.Second)); err != nil {
				t.Fatalf("PeerClocks: %v", err)
			}
			if _, err := a.Heartbeat(testutil.Context(t, 10*time.Second), time.Now().UnixMilli()); err != nil {
				t.Fatalf("A: Heartbeat: %v", err)
			}
			if err := a.Release(testutil.Context(t, 10*time.Second), time.Now().UnixMilli()); err != nil {
				t.Fatalf("A: Release: %v", err)
			}
			if c, err := b.Register(testutil.Context(t, 10*time.Second), leaftest.TestEndpoint(1), 1023); err != nil || c.WorkerID != 3 {
				t.Fatalf("B: Register after A's Release = %+v, %v; want worker 3", c, err)
			}
		})
	}
	if _, err := ordinal.New(nil, -1); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("New with ID -1 = %v, want ErrInvalidArgument", err)
	}
}

// TestHammer: generators on ordinal workers (pods leaf-0..leaf-3, worker
// IDs claimed in etcd) issue from 8 goroutines each, singles and batches;
// every ID is unique, increases per goroutine and carries its pod's worker
// ID. A fifth generator for an ordinal already running cannot start.
func TestHammer(t *testing.T) {
	o := etcdOpener(t)
	gens := make([]*snowflake.Generator, 4)
	for i := range gens {
		id, err := ordinal.WorkerID("leaf-"+strconv.Itoa(i), 0, snowflake.LeafLayout.MaxWorkerID())
		if err != nil {
			t.Fatal(err)
		}
		gens[i] = leaftest.StartSnowflake(t, o(id), leaftest.FastSnowflake(nil, leaftest.TestEndpoint(i)))
		if w := gens[i].Status().WorkerID; w != id {
			t.Fatalf("pod leaf-%d runs as worker %d", i, w)
		}
	}
	s := leaftest.FastSnowflake(open(t, o(2)), leaftest.TestEndpoint(9))
	if g, err := snowflake.New(testutil.Context(t, 10*time.Second), s); !errors.Is(err, leaf.ErrWorkerInUse) {
		if g != nil {
			_ = g.Close(context.Background())
		}
		t.Fatalf("a second leaf-2 started: %v, want ErrWorkerInUse", err)
	}

	leaftest.HammerGenerators(t, gens)
}
