package metrics

import (
	"math"
	"runtime"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/topn"
)

const (
	modeSegment   = "segment"
	modeSnowflake = "snowflake"
)

// collector turns the generators' Status() and Totals() into const metrics
// at scrape time. It keeps no state: every value comes from the generators
// (the totals over all tags from the generator's own, which never go
// down), so a scrape is the only time it does any work.
type collector struct {
	cfg      Config
	explicit map[string]struct{} // cfg.Tags

	buildInfo *prometheus.Desc
	degraded  *prometheus.Desc
	issued    *prometheus.Desc

	// Over all tags.
	segAllLoads      *prometheus.Desc
	segAllLoadErrors *prometheus.Desc
	segAllWaits      *prometheus.Desc
	segAllGivenBack  *prometheus.Desc
	segLoadTime      *prometheus.Desc
	segTags          *prometheus.Desc
	segMinUntilDry   *prometheus.Desc

	// Per tag, for the bounded set.
	segIssued     *prometheus.Desc
	segLoads      *prometheus.Desc
	segLoadErrors *prometheus.Desc
	segLoadSecs   *prometheus.Desc
	segStep       *prometheus.Desc
	segMinStep    *prometheus.Desc
	segRemaining  *prometheus.Desc
	segRate       *prometheus.Desc
	segUntilDry   *prometheus.Desc
	segNextReady  *prometheus.Desc
	segWaits      *prometheus.Desc
	segGivenBack  *prometheus.Desc

	// Per database of a store spread over several.
	dbUp        *prometheus.Desc
	dbReserves  *prometheus.Desc
	dbFailures  *prometheus.Desc
	dbHighestID *prometheus.Desc

	// Forwarding of ordered tags' requests to their owners.
	fwdCalls, fwdRequests, fwdFailures                *prometheus.Desc
	storeFencing, storeFences, storeGap, storeRetries *prometheus.Desc

	sfWorkerID     *prometheus.Desc
	sfLead         *prometheus.Desc
	sfRollbacks    *prometheus.Desc
	sfRollbackSecs *prometheus.Desc
	sfRollbackMax  *prometheus.Desc
	sfHBFailures   *prometheus.Desc
	sfFromCache    *prometheus.Desc
	sfLeaseLeft    *prometheus.Desc
	sfPeers        *prometheus.Desc
	sfPeerSkew     *prometheus.Desc
}

// Tag states of leaf_segment_tags, one per tag, checked in this order.
const (
	stateLoadError = iota // the last reserve attempt failed
	stateLowBuffer        // issuing, and the buffers last less than LowBuffer
	stateUnloaded         // never loaded since start: nobody asked for it
	stateIdle             // loaded, nothing issued over the last 10 seconds
	stateActive           // issuing, buffers above LowBuffer
	numStates
)

var stateNames = [numStates]string{"load_error", "low_buffer", "unloaded", "idle", "active"}

func newCollector(cfg Config) *collector {
	tag := []string{"tag"}
	d := prometheus.NewDesc
	c := &collector{
		cfg: cfg,

		buildInfo: d("leaf_build_info", "Always 1; the labels carry the leaf version and the Go version it was built with.", []string{"version", "goversion"}, nil),
		degraded:  d("leaf_degraded", "1 when the mode reports a reason it is not fully healthy (see /v2/status), else 0. Only enabled modes are exported.", []string{"mode"}, nil),
		issued:    d("leaf_ids_issued_total", "IDs issued since the server started, by mode; for segment, over all tags (per tag: leaf_segment_ids_issued_total).", []string{"mode"}, nil),

		segAllLoads:      d("leaf_segment_all_loads_total", "Ranges reserved from the segment store since start, over all tags.", nil, nil),
		segAllLoadErrors: d("leaf_segment_all_load_errors_total", "Failed attempts to reserve a range from the segment store since start, over all tags.", nil, nil),
		segAllWaits:      d("leaf_segment_all_waits_total", "Requests that found both buffers of their tag empty and waited for a load, over all tags.", nil, nil),
		segAllGivenBack:  d("leaf_segment_all_given_back_ids_total", "Unused IDs returned to the store by a graceful shutdown, over all tags.", nil, nil),
		segLoadTime:      d("leaf_segment_load_duration_seconds", "Time taken by successful reserve calls to the segment store, over all tags.", nil, nil),
		segTags:          d("leaf_segment_tags", "Tags the server knows, by state: load_error (the last load failed), low_buffer (buffers last less than segment.low_buffer), unloaded (not requested since start), idle (nothing issued over 10s), active.", []string{"state"}, nil),
		segMinUntilDry:   d("leaf_segment_min_seconds_until_dry", "The lowest leaf_segment_seconds_until_dry over all tags; +Inf when every tag is idle. That tag always has per-tag series.", nil, nil),

		segIssued:     d("leaf_segment_ids_issued_total", "IDs issued for the tag since start. Per-tag series exist for the busiest tags, the degraded ones and metrics.tags only.", tag, nil),
		segLoads:      d("leaf_segment_loads_total", "Ranges reserved from the segment store for the tag since start.", tag, nil),
		segLoadErrors: d("leaf_segment_load_errors_total", "Failed attempts to reserve a range for the tag since start.", tag, nil),
		segLoadSecs:   d("leaf_segment_load_seconds_total", "Time spent in the tag's successful reserve calls since start; divided by leaf_segment_loads_total, the tag's mean load time.", tag, nil),
		segStep:       d("leaf_segment_step", "The step the tag's next load will reserve (adaptive).", tag, nil),
		segMinStep:    d("leaf_segment_min_step", "The tag's stored step in leaf_alloc: the floor of the adaptive step.", tag, nil),
		segRemaining:  d("leaf_segment_remaining_ids", "IDs left in the tag's two buffers.", tag, nil),
		segRate:       d("leaf_segment_ids_per_second", "IDs issued per second for the tag over the last 10 seconds.", tag, nil),
		segUntilDry:   d("leaf_segment_seconds_until_dry", "How long the tag's buffered IDs last at the current rate if no range arrives; +Inf when the tag is idle.", tag, nil),
		segNextReady:  d("leaf_segment_next_ready", "1 when the tag's second buffer already holds the next range, else 0.", tag, nil),
		segWaits:      d("leaf_segment_waits_total", "Requests for the tag that found both buffers empty and waited for a load.", tag, nil),
		segGivenBack:  d("leaf_segment_given_back_ids_total", "Unused IDs of the tag returned to the store by a graceful shutdown.", tag, nil),

		dbUp:         d("leaf_segment_database_up", "1 while the segment store uses the database, 0 while it skips it (its last reserve or health check failed or timed out). Only for a store spread over several databases; db is the database's place in segment.dsn, from 0.", []string{"db"}, nil),
		dbReserves:   d("leaf_segment_database_reserves_total", "Ranges this server reserved from the database since start.", []string{"db"}, nil),
		dbFailures:   d("leaf_segment_database_failures_total", "Failed or timed-out reserve calls of this server on the database since start.", []string{"db"}, nil),
		dbHighestID:  d("leaf_segment_database_highest_id", "The exclusive end, as an ID, of the highest range this server reserved from the database; 0 before the first.", []string{"db"}, nil),
		fwdCalls:     d("leaf_segment_forward_calls_total", "Calls this server made to the owners of ordered tags it does not own, since start; each carries a batch of requests.", nil, nil),
		fwdRequests:  d("leaf_segment_forward_requests_total", "ID requests for ordered tags that this server's calls to their owners answered, since start.", nil, nil),
		fwdFailures:  d("leaf_segment_forward_failures_total", "Calls to the owners of ordered tags that failed (no answer, or the server asked was no longer the owner), since start.", nil, nil),
		storeFencing: d("leaf_segment_store_fencing", "1 while a failover of the store's database is being fenced (no range is reserved; tags issue from their buffers), else 0.", nil, nil),
		storeFences:  d("leaf_segment_store_fences_total", "Failovers of the store's database this server saw fenced, since start.", nil, nil),
		storeGap:     d("leaf_segment_store_fence_gap_ids", "IDs skipped over all tags by the last fence's margin (0: none yet).", nil, nil),
		storeRetries: d("leaf_segment_store_retries_total", "Reserve attempts run again after a transient conflict (a deadlock; on Galera, a certification conflict of reserves through two nodes), since start.", nil, nil),

		sfWorkerID:     d("leaf_snowflake_worker_id", "The snowflake worker ID held by this server; -1 while it is lost and not yet re-registered.", nil, nil),
		sfLead:         d("leaf_snowflake_high_water_lead_seconds", "Persisted high-water mark minus the current time: how far ahead of the clock IDs may be issued before the next heartbeat must land. Negative means issuing is blocked on a heartbeat.", nil, nil),
		sfRollbacks:    d("leaf_snowflake_clock_rollbacks_total", "Clock steps backwards seen while issuing snowflake IDs.", nil, nil),
		sfRollbackSecs: d("leaf_snowflake_clock_rollback_seconds_total", "Sum of the clock steps backwards seen while issuing, in seconds.", nil, nil),
		sfRollbackMax:  d("leaf_snowflake_clock_rollback_max_seconds", "The largest clock step backwards seen while issuing, in seconds.", nil, nil),
		sfHBFailures:   d("leaf_snowflake_heartbeat_failures_total", "Failed heartbeats to the worker registry since start.", nil, nil),
		sfFromCache:    d("leaf_snowflake_from_cache", "1 when the registry was unreachable at start-up and the worker ID came from the local cache, else 0.", nil, nil),
		sfLeaseLeft:    d("leaf_snowflake_lease_remaining_seconds", "Time until the worker ID's lease lapses unless renewed. Absent for registries without leases.", nil, nil),
		sfPeers:        d("leaf_snowflake_peers", "Other live snowflake servers seen by the last peer clock check. Absent where the registry cannot list peers.", nil, nil),
		sfPeerSkew:     d("leaf_snowflake_peer_skew_seconds", "This server's clock minus the average of the live peers' clocks at the last peer clock check (0 with no peers). Absent where the registry cannot list peers.", nil, nil),
	}
	if len(cfg.Tags) > 0 {
		c.explicit = make(map[string]struct{}, len(cfg.Tags))
		for _, t := range cfg.Tags {
			c.explicit[t] = struct{}{}
		}
	}
	return c
}

// Describe sends every descriptor, including those of disabled modes: a
// collector may export fewer series than it describes, and describing them
// all lets the registry check names and labels once, at New.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.buildInfo, c.degraded, c.issued,
		c.segAllLoads, c.segAllLoadErrors, c.segAllWaits, c.segAllGivenBack, c.segLoadTime, c.segTags, c.segMinUntilDry,
		c.segIssued, c.segLoads, c.segLoadErrors, c.segLoadSecs, c.segStep, c.segMinStep, c.segRemaining,
		c.segRate, c.segUntilDry, c.segNextReady, c.segWaits, c.segGivenBack,
		c.dbUp, c.dbReserves, c.dbFailures, c.dbHighestID,
		c.fwdCalls, c.fwdRequests, c.fwdFailures,
		c.storeFencing, c.storeFences, c.storeGap, c.storeRetries,
		c.sfWorkerID, c.sfLead, c.sfRollbacks, c.sfRollbackSecs, c.sfRollbackMax,
		c.sfHBFailures, c.sfFromCache, c.sfLeaseLeft, c.sfPeers, c.sfPeerSkew,
	} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, c.cfg.Version, runtime.Version())
	if c.cfg.Segment != nil {
		c.collectSegment(ch)
		if c.cfg.Databases != nil {
			c.collectDatabases(ch)
		}
		if c.cfg.Store != nil {
			st := c.cfg.Store()
			ch <- prometheus.MustNewConstMetric(c.storeFencing, prometheus.GaugeValue, boolValue(st.Fencing))
			ch <- prometheus.MustNewConstMetric(c.storeFences, prometheus.CounterValue, float64(st.Fences))
			ch <- prometheus.MustNewConstMetric(c.storeGap, prometheus.GaugeValue, float64(st.Gap))
			ch <- prometheus.MustNewConstMetric(c.storeRetries, prometheus.CounterValue, float64(st.Retries))
		}
		if c.cfg.Forwarded != nil {
			f := c.cfg.Forwarded()
			ch <- prometheus.MustNewConstMetric(c.fwdCalls, prometheus.CounterValue, float64(f.Calls))
			ch <- prometheus.MustNewConstMetric(c.fwdRequests, prometheus.CounterValue, float64(f.Requests))
			ch <- prometheus.MustNewConstMetric(c.fwdFailures, prometheus.CounterValue, float64(f.Failures))
		}
	}
	if c.cfg.Snowflake != nil {
		c.collectSnowflake(ch)
	}
}

// segmentScan is what one pass over Status() finds: the tags by state, and
// the tags that get per-tag series.
type segmentScan struct {
	states      [numStates]int
	minUntilDry float64
	selected    []int // indexes into the statuses, ascending, no duplicates
}

func (c *collector) collectSegment(ch chan<- prometheus.Metric) {
	src := c.cfg.Segment
	ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, boolValue(len(src.Degraded()) > 0), modeSegment)
	t := src.Totals()
	statuses := src.Status()
	sc := c.scan(statuses)
	// The generator keeps state only for the tags in use, and knows more
	// names than it reports: those are unloaded too.
	sc.states[stateUnloaded] += max(0, t.Known-len(statuses))

	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.issued, float64(t.Issued), modeSegment)
	counter(c.segAllLoads, float64(t.Loads))
	counter(c.segAllLoadErrors, float64(t.LoadErrors))
	counter(c.segAllWaits, float64(t.Waits))
	counter(c.segAllGivenBack, float64(t.GivenBack))
	ch <- prometheus.MustNewConstHistogram(c.segLoadTime, t.Loads, t.LoadSeconds, promBuckets(t.LoadLatency))
	for s, n := range sc.states {
		gauge(c.segTags, float64(n), stateNames[s])
	}
	gauge(c.segMinUntilDry, sc.minUntilDry)

	for _, i := range sc.selected {
		st := &statuses[i]
		tag := st.Tag
		counter(c.segIssued, float64(st.Issued), tag)
		counter(c.segLoads, float64(st.Loads), tag)
		counter(c.segLoadErrors, float64(st.LoadErrors), tag)
		counter(c.segLoadSecs, st.LoadSeconds, tag)
		counter(c.segWaits, float64(st.Waits), tag)
		counter(c.segGivenBack, float64(st.GivenBack), tag)
		gauge(c.segStep, float64(st.Step), tag)
		gauge(c.segMinStep, float64(st.MinStep), tag)
		gauge(c.segRemaining, float64(st.Remaining), tag)
		gauge(c.segRate, st.Rate, tag)
		gauge(c.segUntilDry, untilDry(st.SecondsLeft), tag)
		gauge(c.segNextReady, boolValue(st.NextReady), tag)
	}
}

// collectDatabases exports the databases of a store spread over several:
// a handful of series each, bounded by leaf.MaxStripes.
func (c *collector) collectDatabases(ch chan<- prometheus.Metric) {
	for _, db := range c.cfg.Databases() {
		label := strconv.Itoa(db.Index)
		ch <- prometheus.MustNewConstMetric(c.dbUp, prometheus.GaugeValue, boolValue(db.Up), label)
		ch <- prometheus.MustNewConstMetric(c.dbReserves, prometheus.CounterValue, float64(db.Reserves), label)
		ch <- prometheus.MustNewConstMetric(c.dbFailures, prometheus.CounterValue, float64(db.Failures), label)
		ch <- prometheus.MustNewConstMetric(c.dbHighestID, prometheus.GaugeValue, float64(db.HighestID), label)
	}
}

// scan makes the one pass over statuses a scrape needs: it counts the
// states, finds the tag soonest dry, and keeps the busiest and the most
// urgent degraded tags in heaps bounded by TopTags and DegradedTags. It
// allocates nothing per tag.
func (c *collector) scan(statuses []leaf.SegmentStatus) segmentScan {
	sc := segmentScan{minUntilDry: math.Inf(1)}
	low := c.cfg.LowBuffer.Seconds()
	top := topn.New(c.cfg.TopTags, func(a, b int) bool { return leaf.Busier(&statuses[a], &statuses[b]) })
	bad := topn.New(c.cfg.DegradedTags, func(a, b int) bool { return moreUrgent(&statuses[a], &statuses[b]) })
	var explicit []int
	soonestDry := -1

	for i := range statuses {
		st := &statuses[i]

		s := state(st, low)
		sc.states[s]++
		if st.SecondsLeft >= 0 && st.SecondsLeft < sc.minUntilDry {
			sc.minUntilDry, soonestDry = st.SecondsLeft, i
		}
		top.Offer(i)
		if s == stateLoadError || s == stateLowBuffer {
			bad.Offer(i)
		}
		if c.explicit != nil {
			if _, ok := c.explicit[st.Tag]; ok {
				explicit = append(explicit, i)
			}
		}
	}

	sc.selected = make([]int, 0, top.Len()+bad.Len()+len(explicit)+1)
	sc.selected = append(append(append(sc.selected, top.Unordered()...), bad.Unordered()...), explicit...)
	if soonestDry >= 0 {
		// The tag behind leaf_segment_min_seconds_until_dry, so that an
		// alert on it can name the tag without a label on the minimum.
		sc.selected = append(sc.selected, soonestDry)
	}
	slices.Sort(sc.selected)
	sc.selected = slices.Compact(sc.selected)
	return sc
}

// state classifies a tag for leaf_segment_tags; low is LowBuffer in
// seconds, 0 for off.
func state(st *leaf.SegmentStatus, low float64) int {
	switch {
	case st.LoadError != "":
		return stateLoadError
	case low > 0 && st.SecondsLeft >= 0 && st.SecondsLeft < low:
		return stateLowBuffer
	case !st.InitOK:
		return stateUnloaded
	case st.SecondsLeft < 0:
		return stateIdle
	}
	return stateActive
}

// moreUrgent orders degraded tags: a failing store before a low buffer, then
// the sooner dry, then the busier.
func moreUrgent(a, b *leaf.SegmentStatus) bool {
	if ae, be := a.LoadError != "", b.LoadError != ""; ae != be {
		return ae
	}
	if ad, bd := untilDry(a.SecondsLeft), untilDry(b.SecondsLeft); ad != bd {
		return ad < bd
	}
	return leaf.Busier(a, b)
}

// promBuckets is the cumulative counts of h as a constant histogram takes
// them, keyed by the bound in seconds. The bounds are the generator's own
// (segment.loadBuckets), which dashboards and alerts name.
func promBuckets(h leaf.Histogram) map[float64]uint64 {
	n := min(len(h.Bounds), len(h.Counts))
	b := make(map[float64]uint64, n)
	for i := range n {
		b[h.Bounds[i].Seconds()] = h.Counts[i]
	}
	return b
}

// untilDry maps SecondsLeft's "idle" sentinel (-1) to +Inf, so an alert on
// "seconds until dry < X" does not fire for tags nobody is using.
func untilDry(s float64) float64 {
	if s < 0 {
		return math.Inf(1)
	}
	return s
}

func (c *collector) collectSnowflake(ch chan<- prometheus.Metric) {
	src := c.cfg.Snowflake
	ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, boolValue(len(src.Degraded()) > 0), modeSnowflake)
	st := src.Status()
	now := c.cfg.Now()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	ch <- prometheus.MustNewConstMetric(c.issued, prometheus.CounterValue, float64(st.Issued), modeSnowflake)
	gauge(c.sfWorkerID, float64(st.WorkerID))
	// A zero mark means none has been persisted yet; its "lead" would be
	// minus the Unix epoch, a value that only trips alerts.
	if st.HighWater != 0 {
		gauge(c.sfLead, float64(st.HighWater-now.UnixMilli())/1000)
	}
	counter(c.sfRollbacks, float64(st.Rollbacks))
	counter(c.sfRollbackSecs, float64(st.RollbackMs)/1000)
	gauge(c.sfRollbackMax, float64(st.MaxRollbackMs)/1000)
	counter(c.sfHBFailures, float64(st.HeartbeatFailures))
	gauge(c.sfFromCache, boolValue(st.FromCache))
	if !st.LeaseExpires.IsZero() {
		gauge(c.sfLeaseLeft, st.LeaseExpires.Sub(now).Seconds())
	}
	if !st.PeerCheck.IsZero() {
		gauge(c.sfPeers, float64(st.Peers))
		gauge(c.sfPeerSkew, float64(st.PeerSkewMs)/1000)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
