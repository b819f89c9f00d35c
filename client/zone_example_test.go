package client_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
	"github.com/leafgo/leaf/httpapi"
	"github.com/leafgo/leaf/segment"
	"github.com/leafgo/leaf/sqlite"
)

// A client in zone dc1 of a cluster over two zones, one server each, on one
// store: its calls stay in dc1 while dc1's server answers.
func ExampleNewZoned() {
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
	start := func() (*httptest.Server, *segment.Generator) {
		settings := segment.DefaultConfig()
		settings.Store, settings.Logger = store, slog.New(slog.DiscardHandler)
		gen, err := segment.New(context.Background(), settings)
		if err != nil {
			log.Fatal(err)
		}
		return httptest.NewServer(httpapi.New(httpapi.Config{Segment: gen})), gen
	}
	dc1, gen1 := start()
	defer gen1.Close(context.Background())
	defer dc1.Close()
	dc2, gen2 := start()
	defer gen2.Close(context.Background())
	defer dc2.Close()

	c, err := client.NewZoned([]client.Endpoint{
		{URL: dc1.URL, Zone: "dc1"},
		{URL: dc2.URL, Zone: "dc2"},
	}, client.WithZone("dc1"))
	if err != nil {
		log.Fatal(err)
	}
	for range 10 {
		if _, err := c.NextID(context.Background(), "order"); err != nil {
			log.Fatal(err)
		}
	}
	for _, e := range c.Stats().Endpoints {
		fmt.Printf("%s: %d requests\n", e.Zone, e.Requests)
	}
	// Output:
	// dc1: 10 requests
	// dc2: 0 requests
}
