package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/leafgo/leaf/internal/apierr"
)

var (
	bodyOK       = []byte("ok\n")
	bodyDegraded = "degraded\n"
)

// healthz serves /healthz: 200 "ok" while the process can answer at all. It
// checks nothing else, so that a liveness probe never restarts a server that
// is merely waiting for its database.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeBody(w, r, http.StatusOK, textPlain, bodyOK)
}

// readyz serves /readyz: "ok", or "degraded" followed by one reason per line,
// in the clients' words (clientReasons): the probe is open to anyone, and the
// causes (a driver's error, the store's host and port) are for the log and
// the admin's /v2/status.
//
// A degraded server still answers 200. It keeps issuing IDs from its buffers
// through a database outage (that is what the two buffers are for), and every
// node sees the same outage: failing readiness would make Kubernetes pull every
// node from the load balancer at once, turning a database blip into a full
// outage. Probes that want to see degradation as unready (a canary, a
// deployment gate) ask for ?strict=1, which answers 503 when degraded.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	reasons := clientReasons(s.degraded())
	if len(reasons) == 0 {
		writeBody(w, r, http.StatusOK, textPlain, bodyOK)
		return
	}
	b := []byte(bodyDegraded)
	for _, reason := range reasons {
		b = append(b, reason...)
		b = append(b, '\n')
	}
	status := http.StatusOK
	if strict, _ := strconv.ParseBool(r.URL.Query().Get("strict")); strict {
		status = http.StatusServiceUnavailable
	}
	writeBody(w, r, status, textPlain, b)
}

// degraded collects the degraded reasons of every enabled generator, segment
// first. They are kept as the generators word them, unprefixed: each
// generator names itself in its reasons ("segment store unreachable ...",
// "snowflake heartbeat failing ..."). The result is a new slice, so that no
// generator's own slice is ever appended to.
func (s *Server) degraded() []string {
	var seg, snow []string
	if s.seg != nil {
		seg = s.seg.Degraded()
	}
	if s.snow != nil {
		snow = s.snow.Degraded()
	}
	if len(seg)+len(snow) == 0 {
		return nil
	}
	return slices.Concat(seg, snow)
}

// clientReasons turns the generators' degraded reasons into what a client
// may see. A generator words a reason as a summary, then the cause after
// ": ", "; " or " (" ("segment store unreachable since T: dial tcp
// 10.1.2.3:3306: ...", "snowflake heartbeat failing: zk: ...", "snowflake
// clock is behind the last issued ID (T)"); the summary is kept, the cause
// dropped. The segment generator's per-tag reasons lead with "tag NAME: ",
// which is part of the summary. The result is a new slice, one line each.
func clientReasons(reasons []string) []string {
	if len(reasons) == 0 {
		return nil
	}
	out := make([]string, len(reasons))
	for i, r := range reasons {
		r = apierr.OneLine(r)
		prefix := ""
		if rest, ok := strings.CutPrefix(r, "tag "); ok {
			// A tag name has no spaces: the first ": " ends it.
			if name, detail, ok := strings.Cut(rest, ": "); ok {
				prefix, r = "tag "+name+": ", detail
			}
		}
		for _, sep := range [...]string{": ", "; ", " ("} {
			r, _, _ = strings.Cut(r, sep)
		}
		out[i] = prefix + r
	}
	return out
}
