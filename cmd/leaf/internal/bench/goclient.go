package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/leafgo/leaf/client"
)

// clientCallers share one Go client among the workers: its round robin,
// failover and zone preference are what is measured, with the cost of
// net/http and JSON on top of the servers'.
func clientCallers(o *Config) (*client.Client, func() caller, func(), error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = o.TLS
	// One idle connection per worker, as the fasthttp client keeps.
	tr.MaxIdleConnsPerHost = o.Concurrency
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := client.NewZoned(o.Servers, client.WithZone(o.Zone), client.WithLogger(log),
		client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("bench: %w", err)
	}
	newCaller := func() caller { return &clientCaller{c: c, o: o} }
	return c, newCaller, tr.CloseIdleConnections, nil
}

type clientCaller struct {
	c *client.Client
	o *Config
}

func (c *clientCaller) call(ctx context.Context, ids []int64) ([]int64, *failure) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var err error
	switch segment, one := c.o.Mode == "segment", c.o.Count == 1; {
	case segment && one:
		var id int64
		if id, err = c.c.NextID(ctx, c.o.Tag); err == nil {
			ids = append(ids, id)
		}
	case segment:
		var got []int64
		if got, err = c.c.NextIDs(ctx, c.o.Tag, c.o.Count); err == nil {
			ids = append(ids, got...)
		}
	case one:
		var id int64
		if id, err = c.c.SnowflakeID(ctx); err == nil {
			ids = append(ids, id)
		}
	default:
		var got []int64
		if got, err = c.c.SnowflakeIDs(ctx, c.o.Count); err == nil {
			ids = append(ids, got...)
		}
	}
	if err != nil {
		return ids, clientFailure(err)
	}
	return ids, nil
}

// clientFailure names the error the client gave up with: the last server's
// answer, a transport failure, or the client's own ("bad answer").
func clientFailure(err error) *failure {
	var se *client.Error
	var ue *url.Error
	switch {
	case errors.As(err, &se):
		return &failure{kind: fmt.Sprintf("http %d", se.StatusCode), detail: truncate(err.Error(), 200)}
	case errors.Is(err, context.DeadlineExceeded):
		return &failure{kind: "transport timeout", detail: truncate(err.Error(), 200)}
	case errors.As(err, &ue):
		return transportFailure(err)
	}
	return &failure{kind: "client", detail: truncate(err.Error(), 200)}
}
