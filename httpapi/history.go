package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/internal/history"
)

// HistorySource is the server's last minutes, sampled once a second, for
// the monitor page's charts; *history.History satisfies it.
type HistorySource interface {
	// Window returns the samples from sample since on, or every sample
	// kept when since is not one of them.
	Window(since uint64) history.Window
}

// IsIDRoute tells whether route, a route pattern as the RequestObserver is
// given it, issues IDs: the latency the monitor page charts is theirs,
// without the page's own polling or the administration.
func IsIDRoute(route string) bool {
	switch route {
	case segmentGetRoute, snowflakeGetRoute,
		"/v2/segment/{tag}", "/v2/segment/{tag}/batch", "/v2/segment/{tag}/range",
		"/v2/snowflake", "/v2/snowflake/batch":
		return true
	}
	return false
}

// historyResponse is the body of /v2/status/history: without detail, the
// detail flag alone.
type historyResponse struct {
	Detail bool `json:"detail"`
	*history.Window
}

// v2StatusHistory serves /v2/status/history[?since=N]: the samples from N
// on (every sample kept without it), which the monitor page polls with
// the last answer's next. Who gets the series is decided as for
// /v2/status: they name the busiest tags.
func (s *Server) v2StatusHistory(w http.ResponseWriter, r *http.Request) error {
	detail, err := s.statusDetail(r)
	if err != nil {
		return err
	}
	var since uint64
	if v, ok := queryValue(r.URL.RawQuery, "since"); ok {
		if since, err = strconv.ParseUint(v, 10, 64); err != nil {
			return apierr.AsClient(fmt.Errorf("%w: since %q, want a sample number (the last answer's next)", leaf.ErrInvalidArgument, truncate(v, 20)))
		}
	}
	if !detail {
		return writeJSON(w, r, http.StatusOK, historyResponse{})
	}
	win := s.history.Window(since)
	return writeJSON(w, r, http.StatusOK, historyResponse{Detail: true, Window: &win})
}
