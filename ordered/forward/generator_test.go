package forward_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/ordered"
	"github.com/leafgo/leaf/ordered/forward"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// server is one leaf server as leaf serve wires it in forward mode: a
// segment generator whose owner identity is its URL, a forwarder in front
// of it, the HTTP transport on a loopback port.
type server struct {
	url string
	gen *segment.Generator
	fwd *forward.Forwarder
	srv *fasthttp.Server
}

func startServer(t *testing.T, store *sqlite.Store, i int) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{url: "http://" + ln.Addr().String()}
	settings := segment.DefaultConfig()
	settings.Store, settings.Logger = store, testutil.Logger()
	owner := fmt.Sprintf("%s#n%d", s.url, i)
	var tags *ordered.Tags
	if s.gen, tags, err = ordered.NewGenerator(t.Context(), settings, ordered.Config{Owner: owner, OwnerLease: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if s.fwd, err = forward.New(forward.Config{Local: s.gen, Watcher: tags, Self: owner, Wait: 5 * time.Second, Logger: testutil.Logger()}); err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewFastServer(httpapi.New(httpapi.Config{Segment: s.gen, Ordered: tags, Forward: s.fwd, Logger: testutil.Logger()}), httpapi.Limits{})
	s.srv = srv
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		testutil.ShutdownFast(srv)
		s.fwd.Close()
		_ = s.gen.Close(context.Background())
	})
	return s
}

// get asks for n IDs of tag over HTTP, on the Leaf route.
func get(hc *http.Client, base, tag string, n int) ([]int64, error) {
	resp, err := hc.Get(fmt.Sprintf("%s/api/segment/get/%s?count=%d", base, tag, n))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	var ids []int64
	for _, f := range strings.Split(string(b), "\n") {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// TestForwardRealGenerators: two servers on one store, their real segment
// generators and an ordered tag with short segments; clients on both.
// Every answer is checked for the tag's order; the owner then stops
// gracefully, and the other takes over at once and continues above.
func TestForwardRealGenerators(t *testing.T) {
	t.Parallel()
	const tag = "seq"
	store := testutil.Store(t, leaf.Alloc{Tag: tag, MaxID: 1, Step: 20})
	if err := store.SetOrdered(t.Context(), tag, true); err != nil {
		t.Fatal(err)
	}
	servers := []*server{startServer(t, store, 0), startServer(t, store, 1)}
	hc := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	var mu sync.Mutex
	var answers []testutil.Answer
	run := func(servers []*server, workers, each int) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					a := testutil.Answer{Sent: int64(time.Since(start))}
					ids, err := get(hc, servers[(w+i)%len(servers)].url, tag, 1+(w+i)%3)
					a.Received = int64(time.Since(start))
					if err != nil {
						t.Error(err)
						return
					}
					a.IDs = ids
					mu.Lock()
					answers = append(answers, a)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	run(servers, 8, 100)
	testutil.CheckOrdered(t, answers)
	var owner, other *server
	for i, s := range servers {
		if st := s.fwd.Stats(); st.Forwarded > 0 {
			owner, other = servers[1-i], s
			t.Logf("server %d forwarded %d requests in %d calls", i, st.Forwarded, st.Calls)
		}
	}
	if owner == nil || owner.fwd.Stats().Forwarded != 0 {
		t.Fatalf("want one server forwarding to the other: %+v, %+v", servers[0].fwd.Stats(), servers[1].fwd.Stats())
	}

	// A graceful stop releases the lease: the other takes over at once.
	testutil.ShutdownFast(owner.srv)
	if err := owner.gen.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	run([]*server{other}, 4, 50)
	n := testutil.CheckOrdered(t, answers)
	l, _, err := store.TagLease(t.Context(), tag)
	if err != nil || leaf.OwnerURL(l.Owner) != other.url {
		t.Errorf("the lease is %+v (%v), want %s's", l, err, other.url)
	}
	t.Logf("%d IDs in order over %d answers", n, len(answers))
	if slices.ContainsFunc(answers, func(a testutil.Answer) bool { return len(a.IDs) == 0 }) {
		t.Error("an answer without IDs")
	}
}
