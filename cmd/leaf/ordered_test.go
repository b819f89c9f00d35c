package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leafgo/leaf/internal/testutil"
)

// orderedLease is the owner's lease in the ordered-tag tests: short, so
// that takeovers happen within the test's seconds.
const orderedLease = 2 * time.Second

// TestOrderedTagCluster runs three servers on one MariaDB database with an
// ordered tag and holds them to the tag's promise: its IDs strictly
// increase in the order they are issued, whichever server is asked.
//
//	(a) one client alternating the servers sees a strictly increasing
//	    sequence;
//	(b) eight clients on all servers at once: every ID unique, and a
//	    request sent after another's answer arrived gets larger IDs;
//	(c) the owner is killed (kill -9): another server takes the tag over
//	    once the lease has run out, and (b) holds across it;
//	(d) the new owner is stopped (SIGSTOP) past its lease, the last server
//	    takes over, and the stopped one is woken (SIGCONT): (b) holds
//	    across it all, the woken server's answers included, so it issued
//	    nothing of its own after waking.
func TestOrderedTagCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := testutil.BuildLeaf(t)
	dsn := testutil.MySQL(t)
	const tag = "ordered-e2e"
	env := append(testutil.CleanEnv(), "LEAF_SNOWFLAKE_ENABLED=false", "LEAF_ADMIN_TOKEN="+serveToken,
		"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN="+dsn, "LEAF_SEGMENT_OWNER_LEASE="+orderedLease.String())
	// A small step, so that the owner's ranges end often: batches span
	// two of them.
	if r := runBin(t, bin, t.TempDir(), env, "tags", "create", tag, "--step", "50", "--ordered"); r.code != 0 {
		t.Fatalf("tags create --ordered: exit %d: %s", r.code, r.stderr)
	}
	servers := make([]*testutil.LeafServer, 3)
	for i := range servers {
		servers[i] = testutil.StartLeaf(t, bin, t.TempDir(), append(env, "LEAF_DATA_DIR="+t.TempDir()), "--listen", "127.0.0.1:0")
	}
	load := newOrderedLoad(tag)

	// (a) One client, one server after the other.
	var last int64
	for i := range 150 {
		a, status := load.ask(servers[i%3], 1+i%4)
		if status != http.StatusOK {
			t.Fatalf("request %d to server %d: status %d", i, i%3, status)
		}
		if a.IDs[0] <= last {
			t.Fatalf("request %d to server %d: %v after %d; want a strictly increasing sequence", i, i%3, a.IDs, last)
		}
		last = a.IDs[len(a.IDs)-1]
	}

	// leaf get, on a server that forwards or owns: above them all.
	sent := int64(time.Since(load.start))
	r := runBin(t, bin, t.TempDir(), testutil.CleanEnv(), "get", tag, "--count", "3", "--server", servers[1].URL(""))
	ids := testutil.ParseIDs(t, r.stdout)
	if r.code != 0 || len(ids) != 3 || ids[0] <= last {
		t.Fatalf("leaf get: exit %d, %v after %d (stderr %q); want 3 IDs above", r.code, ids, last, r.stderr)
	}
	load.add(testutil.Answer{Sent: sent, Received: int64(time.Since(load.start)), IDs: ids})

	// (b) Eight clients on all servers.
	load.run(t, servers, 8, 1500*time.Millisecond)
	n := testutil.CheckOrdered(t, load.all())
	t.Logf("(a, b) %d IDs in order", n)

	// The servers that forwarded say so in their metrics; the owner
	// forwarded nothing.
	owner := ownerOf(t, servers, tag)
	for i, s := range servers {
		var forwarded float64
		for line := range strings.Lines(getText(t, s.URL("/metrics"))) {
			if v, ok := strings.CutPrefix(line, "leaf_segment_forward_requests_total "); ok {
				forwarded, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		if (forwarded > 0) != (i != owner) {
			t.Errorf("server %d (owner: %v) counts %v forwarded requests on /metrics", i, i == owner, forwarded)
		}
		// A forwarded /v2 answer names the owner, for clients to go there.
		resp, err := http.Post(s.URL("/v2/segment/"+tag), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := ""
		if i != owner {
			want = servers[owner].URL("")
		}
		if got := resp.Header.Get("Leaf-Owner"); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("server %d (owner: %v): POST /v2/segment/%s: %s, Leaf-Owner %q, want 200 and %q", i, i == owner, tag, resp.Status, got, want)
		}
	}

	// (c) kill -9 the owner.
	if err := servers[owner].Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-servers[owner].Exited
	live := slices.Delete(slices.Clone(servers), owner, owner+1)
	before := load.count()
	load.run(t, live, 8, orderedLease+1500*time.Millisecond)
	// A server takes the tag over once it has watched the dead owner's
	// lease go unrenewed for a whole lease, on a request: on a busy
	// machine that may come after the load above, so it goes on, in
	// short runs, until one does.
	next, ok := ownerIndex(t, live, tag)
	for deadline := time.Now().Add(4 * orderedLease); !ok && time.Now().Before(deadline); next, ok = ownerIndex(t, live, tag) {
		load.run(t, live, 8, 200*time.Millisecond)
	}
	if !ok {
		t.Fatalf("no server took the tag over within %v of the kill", orderedLease+1500*time.Millisecond+4*orderedLease)
	}
	if load.count() == before {
		t.Fatal("no request succeeded after the owner was killed")
	}
	n = testutil.CheckOrdered(t, load.all())
	t.Logf("(c) %d IDs in order; the owner was killed, server %s took over", n, live[next].Addr)

	// (d) SIGSTOP the new owner past its lease, then wake it.
	stopped, other := live[next], live[1-next]
	if err := syscall.Kill(stopped.Cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	woken := false
	t.Cleanup(func() {
		if !woken {
			_ = syscall.Kill(stopped.Cmd.Process.Pid, syscall.SIGCONT)
		}
	})
	before = load.count()
	load.run(t, []*testutil.LeafServer{other}, 8, orderedLease+1500*time.Millisecond)
	if load.count() == before {
		t.Fatal("no request succeeded while the owner was stopped")
	}
	if err := syscall.Kill(stopped.Cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woken = true
	wokenAt, wokenServed := load.count(), load.servedBy(stopped)
	load.run(t, []*testutil.LeafServer{stopped, other}, 8, time.Second)
	n = testutil.CheckOrdered(t, load.all())
	if load.servedBy(stopped) == wokenServed {
		t.Error("the woken server answered no request: it should forward them")
	}
	if o := ownerOf(t, live, tag); live[o] != other {
		t.Errorf("after the stopped owner woke, the owner is %s, want %s, which took over", live[o].Addr, other.Addr)
	}
	t.Logf("(d) %d IDs in order; %d answers after the stopped owner woke; errors by status %v", n, load.count()-wokenAt, load.statuses())
}

// orderedLoad sends ID requests for one tag and keeps every answer, with
// when it was sent and received.
type orderedLoad struct {
	tag   string
	start time.Time // the times are nanoseconds since, monotonic
	hc    *http.Client

	mu      sync.Mutex
	answers []testutil.Answer
	status  map[int]int    // the failures' statuses, 0 for a transport error
	served  map[string]int // the answers with IDs, by server address
}

func newOrderedLoad(tag string) *orderedLoad {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	// A stopped server's answers never come: give up on them, as a client
	// would, and ask again.
	return &orderedLoad{tag: tag, start: time.Now(), hc: &http.Client{Transport: t, Timeout: 2 * time.Second},
		status: map[int]int{}, served: map[string]int{}}
}

// badAnswer is the status ask reports for a 200 without the IDs asked.
const badAnswer = -1

// ask sends one request for n IDs: the Leaf route, the /v2 batch route or
// the /v2 single route, as n says. It returns the answer and its status (0
// for a transport error, badAnswer for a 200 without the IDs asked).
func (l *orderedLoad) ask(s *testutil.LeafServer, n int) (testutil.Answer, int) {
	var target string
	switch {
	case n == 1:
		target = "/v2/segment/" + l.tag
	case n%2 == 0:
		target = fmt.Sprintf("/api/segment/get/%s?count=%d", l.tag, n)
	default:
		target = fmt.Sprintf("/v2/segment/%s/batch?count=%d", l.tag, n)
	}
	a := testutil.Answer{Sent: int64(time.Since(l.start))}
	resp, err := l.hc.Get(s.URL(target))
	if err != nil {
		l.fail(0)
		return a, 0
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.Received = int64(time.Since(l.start))
	if err != nil || resp.StatusCode != http.StatusOK {
		l.fail(resp.StatusCode)
		return a, resp.StatusCode
	}
	if strings.HasPrefix(target, "/api/") {
		for _, f := range strings.Split(string(body), "\n") {
			var id int64
			if _, err := fmt.Sscan(f, &id); err == nil {
				a.IDs = append(a.IDs, id)
			}
		}
	} else {
		var v struct {
			ID  int64   `json:"id"`
			IDs []int64 `json:"ids"`
		}
		_ = json.Unmarshal(body, &v)
		a.IDs = v.IDs
		if v.ID != 0 {
			a.IDs = []int64{v.ID}
		}
	}
	if len(a.IDs) != n {
		l.fail(badAnswer)
		return a, badAnswer
	}
	l.add(a)
	l.mu.Lock()
	l.served[s.Addr]++
	l.mu.Unlock()
	return a, http.StatusOK
}

func (l *orderedLoad) add(a testutil.Answer) {
	l.mu.Lock()
	l.answers = append(l.answers, a)
	l.mu.Unlock()
}

func (l *orderedLoad) fail(status int) {
	l.mu.Lock()
	l.status[status]++
	l.mu.Unlock()
}

// run sends requests from workers goroutines for d, each to the servers in
// turn, for 1 to 4 IDs. Failures are counted, not fatal: while an owner is
// replaced the servers answer 503 and clients retry; any other failing
// status fails the test.
func (l *orderedLoad) run(t *testing.T, servers []*testutil.LeafServer, workers int, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; time.Now().Before(end); i++ {
				if _, st := l.ask(servers[i%len(servers)], 1+rand.IntN(4)); st != http.StatusOK && st != http.StatusServiceUnavailable && st != 0 {
					t.Errorf("status %d", st)
					return
				}
			}
		})
	}
	wg.Wait()
}

func (l *orderedLoad) all() []testutil.Answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.answers)
}

func (l *orderedLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

func (l *orderedLoad) servedBy(s *testutil.LeafServer) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served[s.Addr]
}

func (l *orderedLoad) statuses() map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.status)
}

// ownerOf is the index in servers of the tag's owner, as the store's lease
// names it (GET /v2/tags/{tag}).
func ownerOf(t *testing.T, servers []*testutil.LeafServer, tag string) int {
	t.Helper()
	i, ok := ownerIndex(t, servers, tag)
	if !ok {
		t.Fatalf("the tag %s's owner is none of the servers", tag)
	}
	return i
}

// ownerIndex is ownerOf, with ok false rather than a failure when the owner
// is none of the servers (none, or one that died).
func ownerIndex(t *testing.T, servers []*testutil.LeafServer, tag string) (int, bool) {
	t.Helper()
	req, _ := http.NewRequest("GET", servers[0].URL("/v2/tags/"+tag), nil)
	req.Header.Set("Authorization", "Bearer "+serveToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var row struct {
		Ordered bool   `json:"ordered"`
		Owner   string `json:"owner"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&row); err != nil || resp.StatusCode != 200 || !row.Ordered {
		t.Fatalf("GET /v2/tags/%s: %s, %+v, %v", tag, resp.Status, row, err)
	}
	for i, s := range servers {
		if s.URL("") == row.Owner {
			return i, true
		}
	}
	return -1, false
}
