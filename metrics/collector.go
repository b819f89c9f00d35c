package metrics

import (
	"math"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leafgo/leaf"
)

const (
	modeSegment   = "segment"
	modeSnowflake = "snowflake"
)

// collector turns the generators' Status() into const metrics at scrape
// time. It holds no counters of its own: every value comes from the
// generators, so a scrape is the only time it does any work.
type collector struct {
	cfg Config

	buildInfo *prometheus.Desc
	degraded  *prometheus.Desc
	issued    *prometheus.Desc

	segLoads      *prometheus.Desc
	segLoadErrors *prometheus.Desc
	segLoadTime   *prometheus.Desc
	segStep       *prometheus.Desc
	segMinStep    *prometheus.Desc
	segRemaining  *prometheus.Desc
	segRate       *prometheus.Desc
	segUntilDry   *prometheus.Desc
	segNextReady  *prometheus.Desc
	segWaits      *prometheus.Desc
	segGivenBack  *prometheus.Desc

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

func newCollector(cfg Config) *collector {
	tag := []string{"tag"}
	d := prometheus.NewDesc
	return &collector{
		cfg: cfg,

		buildInfo: d("leaf_build_info", "Always 1; the labels carry the leaf version and the Go version it was built with.", []string{"version", "goversion"}, nil),
		degraded:  d("leaf_degraded", "1 when the mode reports a reason it is not fully healthy (see /v2/status), else 0. Only enabled modes are exported.", []string{"mode"}, nil),
		issued:    d("leaf_ids_issued_total", "IDs issued since the server started, by mode and segment tag (empty tag for snowflake).", []string{"mode", "tag"}, nil),

		segLoads:      d("leaf_segment_loads_total", "Ranges reserved from the segment store since start.", tag, nil),
		segLoadErrors: d("leaf_segment_load_errors_total", "Failed attempts to reserve a range from the segment store since start.", tag, nil),
		segLoadTime:   d("leaf_segment_load_duration_seconds", "Time taken by successful reserve calls to the segment store.", tag, nil),
		segStep:       d("leaf_segment_step", "The step the tag's next load will reserve (adaptive).", tag, nil),
		segMinStep:    d("leaf_segment_min_step", "The tag's stored step in leaf_alloc: the floor of the adaptive step.", tag, nil),
		segRemaining:  d("leaf_segment_remaining_ids", "IDs left in the tag's two buffers.", tag, nil),
		segRate:       d("leaf_segment_ids_per_second", "IDs issued per second for the tag over the last 10 seconds.", tag, nil),
		segUntilDry:   d("leaf_segment_seconds_until_dry", "How long the tag's buffered IDs last at the current rate if no range arrives; +Inf when the tag is idle.", tag, nil),
		segNextReady:  d("leaf_segment_next_ready", "1 when the tag's second buffer already holds the next range, else 0.", tag, nil),
		segWaits:      d("leaf_segment_waits_total", "Requests for the tag that found both buffers empty and waited for a load.", tag, nil),
		segGivenBack:  d("leaf_segment_given_back_ids_total", "Unused IDs of the tag returned to the store by a graceful shutdown.", tag, nil),

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
}

// Describe sends every descriptor, including those of disabled modes: a
// collector may export fewer series than it describes, and describing them
// all lets the registry check names and labels once, at New.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.buildInfo, c.degraded, c.issued,
		c.segLoads, c.segLoadErrors, c.segLoadTime, c.segStep, c.segMinStep, c.segRemaining,
		c.segRate, c.segUntilDry, c.segNextReady, c.segWaits, c.segGivenBack,
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
	}
	if c.cfg.Snowflake != nil {
		c.collectSnowflake(ch)
	}
}

func (c *collector) collectSegment(ch chan<- prometheus.Metric) {
	src := c.cfg.Segment
	ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, boolValue(len(src.Degraded()) > 0), modeSegment)
	for _, st := range src.Status() {
		t := st.Tag
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, t)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, t)
		}
		ch <- prometheus.MustNewConstMetric(c.issued, prometheus.CounterValue, float64(st.Issued), modeSegment, t)
		counter(c.segLoads, float64(st.Loads))
		counter(c.segLoadErrors, float64(st.LoadErrors))
		counter(c.segWaits, float64(st.Waits))
		counter(c.segGivenBack, float64(st.GivenBack))
		ch <- prometheus.MustNewConstHistogram(c.segLoadTime, st.Loads, st.LoadSeconds, loadBuckets(st.LoadLatency), t)
		gauge(c.segStep, float64(st.Step))
		gauge(c.segMinStep, float64(st.MinStep))
		gauge(c.segRemaining, float64(st.Remaining))
		gauge(c.segRate, st.Rate)
		gauge(c.segUntilDry, untilDry(st.SecondsLeft))
		gauge(c.segNextReady, boolValue(st.NextReady))
	}
}

// loadBuckets maps SegmentStatus.LoadLatency onto leaf.SegmentLoadBuckets.
// A nil or short slice (no load yet, or a source that does not time loads)
// reads as zeros rather than failing the scrape.
func loadBuckets(cumulative []uint64) map[float64]uint64 {
	b := make(map[float64]uint64, len(leaf.SegmentLoadBuckets))
	for i, le := range leaf.SegmentLoadBuckets {
		var n uint64
		if i < len(cumulative) {
			n = cumulative[i]
		}
		b[le] = n
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
	ch <- prometheus.MustNewConstMetric(c.issued, prometheus.CounterValue, float64(st.Issued), modeSnowflake, "")
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
