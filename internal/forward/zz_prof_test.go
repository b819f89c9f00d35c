package forward_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
)

func TestZZProf(t *testing.T) {
	store := testutil.Store(t, leaf.Alloc{Tag: "seq", MaxID: 1, Step: 100000}, leaf.Alloc{Tag: "plain", MaxID: 1, Step: 100000})
	_ = store.SetOrdered(t.Context(), "seq", true)
	a, b := startServer(t, store, 0), startServer(t, store, 1)
	if _, err := get(http.DefaultClient, a.url, "seq", 1); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"seq", "seq"} {
		hc := &fasthttp.HostClient{Addr: b.url[len("http://"):], MaxConns: 64}
		var n atomic.Int64
		end := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for time.Now().Before(end) {
					code, _, err := hc.Get(nil, b.url+"/api/segment/get/"+tag)
					if err != nil || code != 200 {
						t.Error(code, err)
						return
					}
					n.Add(1)
				}
			})
		}
		before := b.fwd.Stats()
		wg.Wait()
		st := b.fwd.Stats()
		t.Logf("%s: %d req/s; calls %d forwarded %d", tag, n.Load()/2, st.Calls-before.Calls, st.Forwarded-before.Forwarded)
	}
}
