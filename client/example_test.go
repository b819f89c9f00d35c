package client_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// A client of a three-server cluster: calls fail over from one server to the
// next, and a Buffered hands out IDs from leased ranges.
func Example() {
	c, err := client.New([]string{
		"http://10.0.0.1:8080",
		"http://10.0.0.2:8080",
		"http://10.0.0.3:8080",
	}, client.WithTimeout(500*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	// One request per ID (or per batch).
	id, err := c.NextID(ctx, "order")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order", id)

	// Local leases: one request per 10,000 IDs.
	orders, err := c.Buffered("order")
	if err != nil {
		log.Fatal(err)
	}
	defer orders.Close()
	id, err = orders.NextID(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order", id)
}

// A Buffered against a real server in-process: a segment generator on the
// embedded SQLite store, served over loopback.
func ExampleClient_Buffered() {
	dir, err := os.MkdirTemp("", "leaf-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "leaf.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	_ = store.CreateTag(context.Background(), leaf.Alloc{Tag: "order", MaxID: 1, Step: 1000})
	settings := segment.DefaultConfig()
	settings.Store, settings.Logger = store, slog.New(slog.DiscardHandler)
	gen, err := segment.New(context.Background(), settings)
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close(context.Background())
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Segment: gen}))
	defer srv.Close()

	c, err := client.New([]string{srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	orders, err := c.Buffered("order", client.WithRangeSize(100))
	if err != nil {
		log.Fatal(err)
	}
	defer orders.Close()

	ctx := context.Background()
	for range 3 {
		id, err := orders.NextID(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
	}
	ids, err := orders.NextIDs(ctx, 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids)
	// Output:
	// 1
	// 2
	// 3
	// [4 5 6]
}
