package httpapi

import (
	"context"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

// The JSON forms of package leaf's values. The root package's types are
// plain Go; how they look on the wire (member names, their order, which
// are left out when empty) is this package's business, and these types
// are the one place it is written down. testdata/golden pins every byte.

// tagStatus is a tag's buffers as /v2/status and its summary show them
// (leaf.SegmentStatus). last_load comes last and is left out until the
// tag's first load, rather than shown as 0001-01-01.
type tagStatus struct {
	Tag string `json:"tag"`
	// Period is a periodic tag's latest period this server issued from.
	Period string `json:"period,omitempty"`
	// Format is the spec of the tag's ID format (tagshape.Spec), for a
	// tag whose /v2 answers carry "formatted"; see addFormats.
	Format string `json:"format,omitempty"`
	// OpaqueBits is an opaque tag's permutation width; see addFormats.
	OpaqueBits int `json:"opaque_bits,omitempty"`
	// Ordered, Owner and OwnerToken are an ordered tag's: its owner as
	// this server last saw it (advertise URL '#' nonce; this server's own
	// while it owns the tag) and that lease's fencing token.
	Ordered     bool          `json:"ordered,omitempty"`
	Owner       string        `json:"owner,omitempty"`
	OwnerToken  int64         `json:"owner_token,omitempty"`
	InitOK      bool          `json:"init_ok"`
	NextReady   bool          `json:"next_ready"`
	Pos         int           `json:"pos"`
	Loading     bool          `json:"loading"`
	Step        int           `json:"step"`
	MinStep     int           `json:"min_step"`
	LoadError   string        `json:"load_error,omitempty"`
	Buffers     [2]rangeState `json:"buffers"`
	Issued      uint64        `json:"issued"`
	Loads       uint64        `json:"loads"`
	Waits       uint64        `json:"waits"`
	LoadErrors  uint64        `json:"load_errors"`
	LoadSeconds float64       `json:"load_seconds"`
	GivenBack   uint64        `json:"given_back"`
	Remaining   int64         `json:"remaining"`
	Rate        float64       `json:"ids_per_sec"`
	SecondsLeft float64       `json:"seconds_left"`
	LastLoad    time.Time     `json:"last_load,omitzero"`
}

// rangeState is one of a tag's two buffers (leaf.RangeState).
type rangeState struct {
	Start int64 `json:"start"`
	Value int64 `json:"value"`
	Max   int64 `json:"max"`
	Step  int   `json:"step"`
}

func newTagStatus(s *leaf.SegmentStatus) tagStatus {
	t := tagStatus{
		Tag: s.Tag, Period: s.Period, Ordered: s.Ordered, Owner: s.Owner, OwnerToken: s.OwnerToken, InitOK: s.InitOK, NextReady: s.NextReady, Pos: s.Pos, Loading: s.Loading,
		Step: s.Step, MinStep: s.MinStep, LoadError: s.LoadError,
		Issued: s.Issued, Loads: s.Loads, Waits: s.Waits, LoadErrors: s.LoadErrors,
		LoadSeconds: s.LoadSeconds, GivenBack: s.GivenBack, Remaining: s.Remaining,
		Rate: s.Rate, SecondsLeft: s.SecondsLeft, LastLoad: s.LastLoad,
	}
	for i, b := range s.Buffers {
		t.Buffers[i] = rangeState{Start: b.Start, Value: b.Value, Max: b.Max, Step: b.Step}
	}
	return t
}

// addFormats sets the Format and OpaqueBits of the statuses of tags that
// have them. The
// shapes come from the generator's memory (a tag in use had its shape read
// at its first load); one it cannot read is left out rather than fail the
// whole status.
func (s *Server) addFormats(ctx context.Context, ts ...*tagStatus) {
	for _, t := range ts {
		if t.Tag == "" {
			continue
		}
		sh, err := s.seg.TagShape(ctx, t.Tag)
		if err != nil {
			continue
		}
		if !sh.Format.IsPlain() {
			t.Format = tagshape.Spec(sh.Format, sh.Period != leaf.PeriodNone)
		}
		t.OpaqueBits = sh.OpaqueBits
	}
}

// tagStatuses converts a page of statuses to their JSON form.
func tagStatuses(st []leaf.SegmentStatus) []tagStatus {
	out := make([]tagStatus, len(st))
	for i := range st {
		out[i] = newTagStatus(&st[i])
	}
	return out
}

// workerStatus is the snowflake worker as /v2/status and its summary show
// it (leaf.WorkerStatus). The times a worker may not have (no lease, no
// heartbeat or peer check yet) and an empty heartbeat error are left out.
type workerStatus struct {
	Registry          string    `json:"registry"`
	Endpoint          string    `json:"endpoint"`
	Layout            string    `json:"layout"`
	WorkerID          int64     `json:"worker_id"`
	FromCache         bool      `json:"from_cache"`
	HighWater         int64     `json:"high_water_ms"`
	LastIssued        int64     `json:"last_issued_ms"`
	LeaseExpires      time.Time `json:"lease_expires,omitzero"`
	LastHeartbeat     time.Time `json:"last_heartbeat,omitzero"`
	HeartbeatError    string    `json:"heartbeat_error,omitempty"`
	HeartbeatFailures int64     `json:"heartbeat_failures"`
	Rollbacks         int64     `json:"rollbacks"`
	MaxRollbackMs     int64     `json:"max_rollback_ms"`
	RollbackMs        int64     `json:"rollback_ms"`
	Peers             int       `json:"peers"`
	PeerSkewMs        int64     `json:"peer_skew_ms"`
	PeerCheck         time.Time `json:"peer_check,omitzero"`
	Issued            uint64    `json:"issued"`
	Rate              float64   `json:"ids_per_sec"`
}

func newWorkerStatus(s leaf.WorkerStatus) *workerStatus {
	return &workerStatus{
		Registry: s.Registry, Endpoint: s.Endpoint, Layout: s.Layout, WorkerID: s.WorkerID, FromCache: s.FromCache,
		HighWater: s.HighWater, LastIssued: s.LastIssued,
		LeaseExpires: s.LeaseExpires, LastHeartbeat: s.LastHeartbeat, HeartbeatError: s.HeartbeatError,
		HeartbeatFailures: s.HeartbeatFailures, Rollbacks: s.Rollbacks, MaxRollbackMs: s.MaxRollbackMs,
		RollbackMs: s.RollbackMs, Peers: s.Peers, PeerSkewMs: s.PeerSkewMs, PeerCheck: s.PeerCheck,
		Issued: s.Issued, Rate: s.Rate,
	}
}

// TagRow is a row of leaf_alloc as the /v2/tags routes show it
// (leaf.Alloc), with its tag's shape (leaf.TagShape), whose members are
// left out for a plain tag. update_time is always there, 0001-01-01 for a
// store that keeps none. A periodic tag always shows its time zone (UTC
// included) and its format, whose spec holds {period}. leaf tags list
// --json prints the same rows, so that scripts read both alike.
type TagRow struct {
	Tag         string    `json:"tag"`
	MaxID       int64     `json:"max_id"`
	Step        int       `json:"step"`
	Description string    `json:"description"`
	UpdateTime  time.Time `json:"update_time"`
	Period      string    `json:"period,omitempty"`
	TimeZone    string    `json:"time_zone,omitempty"`
	Format      string    `json:"format,omitempty"`
	OpaqueBits  int       `json:"opaque_bits,omitempty"`
	// Ordered: the tag's IDs strictly increase in the order they are
	// issued, across the cluster (leaf.OrderedStore). GET /v2/tags/{tag}
	// of an ordered tag adds Owner, the URL of the server that owns it
	// while its lease holds.
	Ordered bool   `json:"ordered,omitempty"`
	Owner   string `json:"owner,omitempty"`
	// GET /v2/tags/{tag} of a periodic tag adds the period the server's
	// clock is in and how many periods have a row.
	CurrentPeriod string `json:"current_period,omitempty"`
	PeriodCount   *int   `json:"period_count,omitempty"`
}

// NewTagRow is a's row with its tag's shape sh.
func NewTagRow(a leaf.Alloc, sh leaf.TagShape) TagRow {
	row := TagRow{Tag: a.Tag, MaxID: a.MaxID, Step: a.Step, Description: a.Description, UpdateTime: a.UpdateTime,
		Period: string(sh.Period), TimeZone: sh.TimeZone, OpaqueBits: sh.OpaqueBits}
	periodic := sh.Period != leaf.PeriodNone
	if periodic && row.TimeZone == "" {
		row.TimeZone = "UTC"
	}
	if periodic || !sh.Format.IsPlain() {
		row.Format = tagshape.Spec(sh.Format, periodic)
	}
	return row
}

// tagRows converts a page of rows to their JSON form, with the shapes of
// their tags; never nil, so that an empty page is [].
func tagRows(rows []leaf.Alloc, shapes map[string]leaf.TagShape) []TagRow {
	out := make([]TagRow, len(rows))
	for i, a := range rows {
		out[i] = NewTagRow(a, shapes[a.Tag])
	}
	return out
}

// periodRow is one period of a periodic tag (leaf.PeriodAlloc).
type periodRow struct {
	Period     string    `json:"period"`
	MaxID      int64     `json:"max_id"`
	Step       int       `json:"step"`
	UpdateTime time.Time `json:"update_time"`
}

func periodRows(ps []leaf.PeriodAlloc) []periodRow {
	out := make([]periodRow, len(ps))
	for i, p := range ps {
		out[i] = periodRow{Period: p.Key, MaxID: p.MaxID, Step: p.Step, UpdateTime: p.UpdateTime}
	}
	return out
}
