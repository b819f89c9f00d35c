package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/leafgo/leaf/snowflake"
)

// SnowflakeLifetime is how long the snowflake layout must still last when
// serve starts: the default of snowflake.Config.Lifetime, which serve
// keeps. cmd/leaf's TestLayoutLifetimeAgreesWithGenerator holds the two
// together.
const SnowflakeLifetime = snowflake.DefaultLifetime

// layoutKeys are the keys that make up the snowflake layout.
var layoutKeys = []string{"snowflake.epoch", "snowflake.time_bits", "snowflake.worker_bits", "snowflake.sequence_bits"}

// CheckSnowflakeLifetime refuses what the snowflake generator would refuse
// about the layout once the store is open and a worker ID claimed: an epoch
// still to come, or a layout that runs out within SnowflakeLifetime of now.
// serve checks it before creating anything. It is not part of Validate,
// which does not read the clock: decoding IDs with an old layout is fine.
// A layout Validate rejects is left to Validate.
func (c Config) CheckSnowflakeLifetime(now time.Time, o Origins) error {
	l := c.Snowflake.Layout()
	if l.Validate() != nil {
		return nil
	}
	var from []string
	for _, k := range append([]string{"snowflake.layout"}, layoutKeys...) {
		if o.Set(k) {
			from = append(from, o[k])
		}
	}
	where := ""
	if len(from) > 0 {
		where = " (from " + strings.Join(from, ", ") + ")"
	}
	ms := now.UnixMilli()
	switch {
	case ms < l.Epoch:
		return fmt.Errorf("%w: snowflake.epoch%s: %s is in the future (the clock reads %s)",
			ErrInvalid, where, fmtMs(l.Epoch), fmtMs(ms))
	case l.End()-ms < SnowflakeLifetime.Milliseconds():
		return fmt.Errorf("%w: snowflake.time_bits%s: layout %s runs out at %s, less than 10 years from now: give the time part more bits or the epoch a later date",
			ErrInvalid, where, l, fmtMs(l.End()))
	}
	return nil
}

func fmtMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
