package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
	"github.com/leafgo/leaf/tagshape"
)

// periodsPage is the body of GET /v2/tags/{tag}/periods.
type periodsPage struct {
	Tag     string      `json:"tag"`
	Periods []periodRow `json:"periods"`
	// Next is the cursor of the next page: ?before=NEXT, with the same
	// limit. Absent on the last page.
	Next string `json:"next,omitempty"`
}

// v2ListPeriods serves GET /v2/tags/{tag}/periods[?before=KEY][&limit=N]:
// a page of a periodic tag's periods, newest first. A plain tag has none.
func (s *Server) v2ListPeriods(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	raw := r.URL.RawQuery
	limit := defaultPageLimit
	if v, ok := queryValue(raw, "limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageLimit {
			return apierr.AsClient(fmt.Errorf("%w: limit %q, want 1..%d", leaf.ErrInvalidArgument, truncate(v, 20), maxPageLimit))
		}
		limit = n
	}
	before, _ := queryValue(raw, "before")
	if before != "" {
		if err := tagshape.ValidatePeriodKey(before); err != nil {
			return apierr.AsClient(fmt.Errorf("%w: before must be a period, the last of the previous page: %w", leaf.ErrInvalidArgument, err))
		}
	}
	// A name the server does not know costs a store read only within the
	// generator's lookup budget, as on the ID routes.
	if err := s.segmentTagKnown(r.Context(), tag); err != nil {
		return err
	}
	rows, err := s.tags.Periods(r.Context(), tag, before, limit+1)
	if err != nil {
		return err
	}
	page, next := cutPage(rows, limit, func(p leaf.PeriodAlloc) string { return p.Key })
	return writeJSON(w, r, http.StatusOK, periodsPage{Tag: tag, Periods: periodRows(page), Next: next})
}

// pruneResponse is the body of DELETE /v2/tags/{tag}/periods.
type pruneResponse struct {
	Tag string `json:"tag"`
	// Before is the first period kept: every period below it was removed.
	Before  string      `json:"before"`
	Removed []periodRow `json:"removed"`
}

// v2PrunePeriods serves DELETE /v2/tags/{tag}/periods?keep=N (or
// ?before=KEY): it removes a periodic tag's periods more than N back (or
// below KEY), each leaving a tombstone, and answers what it removed. The
// current period and the one before are never removed.
func (s *Server) v2PrunePeriods(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	var pr leaf.Prune
	raw := r.URL.RawQuery
	keep, hasKeep := queryValue(raw, "keep")
	before, hasBefore := queryValue(raw, "before")
	switch {
	case hasKeep == hasBefore:
		return apierr.AsClient(fmt.Errorf("%w: name the periods to remove with keep=N (keep the N latest periods, N >= 2) or before=KEY, one of them", leaf.ErrInvalidArgument))
	case hasKeep:
		n, err := strconv.Atoi(keep)
		if err != nil || n < 2 || n > leaf.MaxPruneKeep {
			return apierr.AsClient(fmt.Errorf("%w: keep %q, want 2..%d: the current period and the one before are always kept", leaf.ErrInvalidArgument, truncate(keep, 20), leaf.MaxPruneKeep))
		}
		pr.Keep = n
	default:
		if err := tagshape.ValidatePeriodKey(before); err != nil {
			return apierr.AsClient(err)
		}
		pr.Before = before
	}
	res, err := s.seg.PrunePeriods(r.Context(), tag, pr)
	if errors.Is(err, leaf.ErrInvalidArgument) {
		// The generator's checks of the request against the tag: a tag
		// without a period, a key of another period's length, a key that
		// would remove the current period. Written for the client.
		return apierr.AsClient(err)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, r, http.StatusOK, pruneResponse{Tag: tag, Before: res.Before, Removed: periodRows(res.Removed)})
}

// decodedID is the body of GET /v2/tags/{tag}/decode.
type decodedID struct {
	Tag    string `json:"tag"`
	ID     string `json:"id"`
	Raw    int64  `json:"raw"`
	Period string `json:"period,omitempty"`
}

// v2DecodeID serves GET /v2/tags/{tag}/decode?id=X: the raw sequence an
// ID of the tag stands for (for an opaque tag, through its permutation);
// X is a number or, for a formatted or periodic tag, its formatted ID.
// An X the tag cannot have issued is a 400.
func (s *Server) v2DecodeID(w http.ResponseWriter, r *http.Request) error {
	tag, err := s.adminTag(r)
	if err != nil {
		return err
	}
	id, ok := queryValue(r.URL.RawQuery, "id")
	if !ok || id == "" {
		return apierr.AsClient(fmt.Errorf("%w: the parameter id is required: an ID the tag issued", leaf.ErrInvalidArgument))
	}
	if err := s.segmentTagKnown(r.Context(), tag); err != nil {
		return err
	}
	d, err := s.seg.Decode(r.Context(), tag, id)
	if err != nil {
		if errors.Is(err, leaf.ErrInvalidArgument) || errors.Is(err, leaf.ErrNotReady) {
			return apierr.AsClient(err) // the message is written for the client
		}
		return err
	}
	return writeJSON(w, r, http.StatusOK, decodedID{Tag: d.Tag, ID: d.ID, Raw: d.Raw, Period: d.Period})
}
