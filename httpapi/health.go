package httpapi

import (
	"net/http"
	"slices"
	"strconv"
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

// readyz serves /readyz: "ok", or "degraded" followed by one reason per line.
//
// A degraded server still answers 200. It keeps issuing IDs from its buffers
// through a database outage (that is what the two buffers are for), and every
// node sees the same outage: failing readiness would make Kubernetes pull every
// node from the load balancer at once, turning a database blip into a full
// outage. Probes that want to see degradation as unready (a canary, a
// deployment gate) ask for ?strict=1, which answers 503 when degraded.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	reasons := s.degraded()
	if len(reasons) == 0 {
		writeBody(w, r, http.StatusOK, textPlain, bodyOK)
		return
	}
	b := []byte(bodyDegraded)
	for _, reason := range reasons {
		b = append(b, oneLine(reason)...)
		b = append(b, '\n')
	}
	status := http.StatusOK
	if strict, _ := strconv.ParseBool(r.URL.Query().Get("strict")); strict {
		status = http.StatusServiceUnavailable
	}
	writeBody(w, r, status, textPlain, b)
}

// degraded collects the degraded reasons of every enabled generator, segment
// first. They are shown as the generators word them, unprefixed: each
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
