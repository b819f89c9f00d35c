package client

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leafgo/leaf"
)

// Endpoint is a server of NewZoned: its base URL, as New takes it, and the
// zone (data centre, availability zone) it runs in.
type Endpoint struct {
	URL string
	// Zone names where the server runs: 1 to 64 letters, digits, '.', '_'
	// or '-'. "" puts it in no zone: for a client with WithZone, it is in
	// another zone.
	Zone string
}

// zoneSyntax ends the error of a malformed zone name.
const zoneSyntax = "is not 1 to 64 letters, digits, '.', '_' or '-'"

// ValidateZone checks a zone name as NewZoned and WithZone do, for callers
// that read zones from their configuration: nil, or an error matching
// leaf.ErrInvalidArgument. "" is valid: no zone.
func ValidateZone(zone string) error {
	if zone != "" && !validZone(zone) {
		return fmt.Errorf("%w: zone %q %s", leaf.ErrInvalidArgument, zone, zoneSyntax)
	}
	return nil
}

func validZone(z string) bool {
	if len(z) == 0 || len(z) > 64 {
		return false
	}
	for i := 0; i < len(z); i++ {
		b := z[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '.' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}

// NewZoned returns a client of endpoints, as New does, knowing the zone of
// each. With WithZone, calls go to the servers of the client's own zone,
// round robin, and to the others only while every server of its zone is
// failing or cooling down (see WithCooldown): a call that finds them all
// failing is answered from another zone, and the calls after it go there
// directly until the own zone's cool-downs end and its servers are tried
// first again. Without WithZone the zones only label Stats and log lines,
// and calls go round robin to all servers, as with New.
func NewZoned(endpoints []Endpoint, opts ...Option) (*Client, error) {
	return newClient(endpoints, opts)
}

// WithZone names the client's own zone: calls prefer the endpoints of
// NewZoned in that zone, and fail over to the others. At least one
// endpoint must be in it: a zone that matches none is refused, as a typo
// would otherwise send every call across zones. "" is no zone, the
// default: every server alike.
func WithZone(zone string) Option {
	return func(c *Client) error {
		if zone != "" && !validZone(zone) {
			return fmt.Errorf("%w: WithZone(%q): the zone %s", leaf.ErrInvalidArgument, zone, zoneSyntax)
		}
		c.zone = zone
		return nil
	}
}

// buildTiers orders the endpoints by preference, once the options are in.
func (c *Client) buildTiers() error {
	all := make([]int, len(c.eps))
	for i := range all {
		all[i] = i
	}
	if c.zone == "" {
		c.tiers = [][]int{all}
		return nil
	}
	var own, other []int
	for i, ep := range c.eps {
		if ep.zone == c.zone {
			own = append(own, i)
		} else {
			other = append(other, i)
		}
	}
	if len(own) == 0 {
		return fmt.Errorf("%w: WithZone(%q): no endpoint is in that zone (%s)", leaf.ErrInvalidArgument, c.zone, c.zoneList())
	}
	c.tiers = [][]int{own}
	if len(other) > 0 {
		c.tiers = append(c.tiers, other)
	}
	return nil
}

// zoneList names the endpoints' zones for an error message.
func (c *Client) zoneList() string {
	var zones []string
	for _, ep := range c.eps {
		if ep.zone != "" {
			zones = append(zones, fmt.Sprintf("%q", ep.zone))
		}
	}
	if len(zones) == 0 {
		return "no endpoint has a zone; give them with NewZoned"
	}
	slices.Sort(zones)
	return "endpoints' zones: " + strings.Join(slices.Compact(zones), ", ")
}

// noteZone logs when calls start being answered from another zone than the
// client's, and when they come back: once per trip, however many calls.
func (c *Client) noteZone(ep *endpoint) {
	away := ep.zone != c.zone
	if c.away.Load() == away || !c.away.CompareAndSwap(!away, away) {
		return
	}
	if away {
		c.log.Warn("leaf client: no server of the client's zone answers; calling other zones",
			"zone", c.zone, "endpoint", ep.base, "endpoint_zone", ep.zone)
	} else {
		c.log.Info("leaf client: a server of the client's zone answers again; back to it", "zone", c.zone, "endpoint", ep.base)
	}
}

// Stats tells where a Client's requests went.
type Stats struct {
	// Zone is the client's own zone (WithZone); "" for none.
	Zone string
	// Endpoints are the servers, in the order given to New or NewZoned.
	Endpoints []EndpointStats
}

// EndpointStats counts the requests sent to one server.
type EndpointStats struct {
	URL  string // as given, without a trailing slash
	Zone string // "" for none
	// Requests counts the attempts sent to it, the failed ones included: a
	// call that failed over counts once on each server it tried.
	Requests uint64
	// Failures counts its attempts that failed on its side: transport
	// error, timeout, 5xx, garbled answer. A 4xx is the request's fault
	// and a call its caller cancelled is nobody's: neither is counted.
	Failures uint64
	// CoolingDown is set while it is tried after the others for failing.
	CoolingDown bool
}

// ZoneStats sums the EndpointStats of one zone.
type ZoneStats struct {
	Requests, Failures uint64
}

// Stats returns the counters of the servers' requests since New.
func (c *Client) Stats() Stats {
	now := time.Now().UnixNano()
	s := Stats{Zone: c.zone, Endpoints: make([]EndpointStats, len(c.eps))}
	for i, ep := range c.eps {
		s.Endpoints[i] = EndpointStats{
			URL:         ep.base,
			Zone:        ep.zone,
			Requests:    ep.requests.Load(),
			Failures:    ep.failures.Load(),
			CoolingDown: ep.downUntil.Load() > now,
		}
	}
	return s
}

// ByZone sums the counters per zone; the servers without one are under "".
func (s Stats) ByZone() map[string]ZoneStats {
	m := make(map[string]ZoneStats)
	for _, e := range s.Endpoints {
		z := m[e.Zone]
		z.Requests += e.Requests
		z.Failures += e.Failures
		m[e.Zone] = z
	}
	return m
}
