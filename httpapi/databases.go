package httpapi

import "time"

// DatabaseStatus is one database of a segment store spread over several
// (package multidb), as /v2/status, its summary, /cache and /db show it.
// Only the admin sees it: the names say where the databases are.
type DatabaseStatus struct {
	// Index is the database's place in segment.dsn, from 0: it serves the
	// IDs whose block number is ≡ Index (mod the number of databases).
	Index int `json:"index"`
	// Name is the database's DSN with any password hidden.
	Name string `json:"name"`
	// Healthy is false while the store skips the database: its last
	// reserve or health check failed or timed out. RetryAt is when an
	// unhealthy database is tried again.
	Healthy bool      `json:"healthy"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Verified is false until the database's record of its place in the
	// list has been read (it was unreachable since start): it serves
	// nothing before.
	Verified bool `json:"verified"`
	// LastError is the cause of the last failure, "" if none since start;
	// it is kept after the database recovers.
	LastError string `json:"last_error,omitempty"`
	// LastReserve is when this server last reserved a range from it.
	LastReserve time.Time `json:"last_reserve,omitzero"`
	// Reserves and Failures count this server's reserve calls on the
	// database since start that succeeded and that failed.
	Reserves uint64 `json:"reserves"`
	Failures uint64 `json:"failures"`
	// HighestID is the exclusive end, as an ID, of the highest range this
	// server has reserved from the database; 0 before the first.
	HighestID int64 `json:"highest_id"`
}

// databases is the store's databases for the admin's views: nil when the
// store is one database or the request has no detail.
func (s *Server) databases(detail bool) []DatabaseStatus {
	if s.dbs == nil || !detail {
		return nil
	}
	return s.dbs()
}
