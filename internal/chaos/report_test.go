package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// minIDsPerMinute is the volume a run must check, pro rata of its duration.
const minIDsPerMinute = 5_000_000

// census counts requests without IDs by what they got and when.
type censusKey struct {
	mode    mode
	status  string // "503", "transport", "200 bad body", ...
	message string
	during  string // the fault the request overlapped, if any
	allowed bool
}

// share counts requests in a window and those that got IDs.
type share struct{ total, ok int }

func (s share) String() string {
	if s.total == 0 {
		return "no requests"
	}
	return fmt.Sprintf("%d of %d (%.2f%%)", s.ok, s.total, 100*float64(s.ok)/float64(s.total))
}

type results struct {
	requests, ok [modes]int
	ids          [modes]int
	tagIDs       []int
	dups         map[string]int // "segment TAG", "ordered TAG" or "snowflake" → IDs seen twice or more
	dupExamples  []string
	violations   int
	violationMsg []string
	census       map[censusKey]int
	dbOutage     share    // segment requests started in the outage, to servers up throughout
	regOutage    share    // snowflake requests started in the registry outage, to servers up throughout
	clockStepped share    // snowflake requests to the stepped server during the step
	disallowed   []string // the first requests that failed in a way not promised
	workerIDs    map[int64]uint8
	logWarnings  map[string]int // server log lines worth a look, by kind
	problems     []string

	// ordered requests started outside every window where the ordered tag
	// may fail (orderedExcuse), and inside one; violations of its order.
	orderedClear, orderedExcused share
	orderedViolations            int
	orderedOutages               []string // stretches of failed ordered requests
}

func (res *results) problem(format string, args ...any) {
	res.problems = append(res.problems, fmt.Sprintf(format, args...))
}

// check runs every assertion over what the workers received.
func (r *run) check(workers []*worker) *results {
	res := &results{tagIDs: make([]int, len(tags)), dups: map[string]int{}, census: map[censusKey]int{},
		workerIDs: map[int64]uint8{}, logWarnings: map[string]int{}}

	// Uniqueness, by sorting: cheaper than a set at tens of millions.
	for ti, tag := range tags {
		if tag.ordered && !r.ordered {
			continue
		}
		var all []int64
		for _, w := range workers {
			all = append(all, w.segIDs[ti]...)
		}
		res.tagIDs[ti] = len(all)
		res.ids[tag.mode()] += len(all)
		r.countDups(res, tag.dupKey(), all)
	}
	var snow []int64
	for _, w := range workers {
		snow = append(snow, w.snowIDs...)
		for wid, servers := range w.snowFrom {
			res.workerIDs[wid] |= servers
		}
	}
	res.ids[snowflakeMode] = len(snow)
	r.countDups(res, "snowflake", snow)
	snow = nil

	for _, w := range workers {
		res.violations += len(w.violations)
		if w.mode == orderedMode {
			res.orderedViolations += len(w.violations)
		}
		for _, v := range w.violations {
			if v.msg != "" && len(res.violationMsg) < maxViolations {
				res.violationMsg = append(res.violationMsg, fmt.Sprintf("%.1fs %s", v.at.Seconds(), v.msg))
			}
		}
	}
	if res.violations > 0 {
		res.problem("%d IDs out of order, out of range or in a bad answer; first: %s", res.violations,
			strings.Join(res.violationMsg, "; "))
	}

	r.mu.Lock()
	dbDown, regDown, clockSpan, clockServer := r.dbDown, r.regDown, r.clockSpan, r.clockServer
	r.mu.Unlock()
	for _, w := range workers {
		for _, rec := range w.records {
			res.requests[rec.mode]++
			ok := rec.status == 200
			if ok {
				res.ok[rec.mode]++
			}
			upThroughout := func(s span) bool { return !r.servers[rec.server].wasDown(s.from, s.to) }
			switch {
			case rec.mode == segmentMode && startedIn(dbDown, rec) && upThroughout(dbDown):
				res.dbOutage.add(ok)
			case rec.mode == snowflakeMode && startedIn(regDown, rec) && upThroughout(regDown):
				res.regOutage.add(ok)
			}
			if rec.mode == snowflakeMode && int(rec.server) == clockServer && startedIn(clockSpan, rec) {
				res.clockStepped.add(ok)
			}
			if rec.mode == orderedMode {
				if r.orderedExcuse(rec) != "" || r.servers[rec.server].wasDown(rec.start, rec.end) {
					res.orderedExcused.add(ok)
				} else {
					res.orderedClear.add(ok)
				}
			}
		}
		for _, f := range w.failures {
			k := censusKey{mode: f.mode, message: f.kind, during: r.during(f.record)}
			excuse := ""
			if f.mode == orderedMode {
				// A transport error has its own excuse: the server was
				// down (k.during says so).
				if excuse = r.orderedExcuse(f.record); excuse != "" && f.status != statusTransport {
					k.during = excuse
				}
			}
			switch f.status {
			case 503:
				// The promised answer when no ID can be issued yet. An
				// ordered tag has no buffers on the servers that do not
				// own it: it is promised only while its owner is gone
				// and its lease runs, or the store is out.
				k.status, k.allowed = "503", f.mode != orderedMode || excuse != ""
			case statusTransport:
				// Only a server that was down may fail to answer.
				k.status, k.allowed = "transport", r.servers[f.server].wasDown(f.start, f.end)
			case statusBadBody:
				k.status = "200 bad body"
			default:
				k.status = fmt.Sprint(f.status)
			}
			res.census[k]++
			if !k.allowed && len(res.disallowed) < maxViolations {
				res.disallowed = append(res.disallowed, fmt.Sprintf("%.3fs–%.3fs leaf-%d %s: %s %s (during: %s)",
					f.start.Seconds(), f.end.Seconds(), f.server, f.mode, k.status, k.message, k.during))
			}
		}
	}
	for _, w := range workers {
		if w.mode == orderedMode {
			res.orderedOutages = append(res.orderedOutages, r.outages(w.failures)...)
		}
	}
	slices.Sort(res.disallowed)
	for k, n := range res.census {
		if !k.allowed && k.mode == orderedMode {
			res.problem("%d ordered requests got %s %q (during: %s); only 503 while an owner may be gone or the store is out (a kill or the mariadb outage, + %v), or a transport error from a server that was down, is allowed",
				n, k.status, k.message, k.during, ownerLease+ownerGrace)
		} else if !k.allowed {
			res.problem("%d %s requests got %s %q (during: %s); only 503, or a transport error from a server that was down, is allowed",
				n, k.mode, k.status, k.message, k.during)
		}
	}

	if dbDown.from > 0 && (res.dbOutage.total == 0 || res.dbOutage.ok != res.dbOutage.total) {
		res.problem("segment requests during the mariadb outage %v: %v got IDs; the buffers must carry every one", dbDown, res.dbOutage)
	}
	if r.ordered && res.orderedClear.total == 0 {
		res.problem("no ordered request outside the fault windows: the ordered load did not run")
	}
	// A registry that keeps one ID per endpoint is a weak dependency: the
	// worker cache carries the high-water mark (SPEC §1.4). A leasing one
	// (etcd) must stop before its lease can pass on, so there 503 is allowed.
	if r.registry == "zookeeper" && regDown.from > 0 && (res.regOutage.total == 0 || res.regOutage.ok != res.regOutage.total) {
		res.problem("snowflake requests during the %s outage %v: %v got IDs; the worker cache must carry every one", r.reg.name, regDown, res.regOutage)
	}
	if clockSpan.from > 0 && res.clockStepped.ok == res.clockStepped.total {
		res.problem("snowflake requests to leaf-%d while its clock was %v back: %v got IDs; the step did not take effect",
			clockServer, -clockStep, res.clockStepped)
	}

	total := 0
	for _, n := range res.ids {
		total += n
	}
	if want := int(float64(minIDsPerMinute) * r.duration.Minutes()); total < want {
		res.problem("only %d IDs checked; the run should check at least %d", total, want)
	}
	kinds := map[string]int{}
	for _, f := range r.faults {
		kinds[f.kind]++
	}
	for _, k := range []string{"leaf kill -9 + restart", "mariadb kill -9 + restart", r.reg.name + " kill -9 + restart", "clock step"} {
		if kinds[k] == 0 {
			res.problem("no %q fault was injected", k)
		}
	}

	for _, s := range r.servers {
		r.scanLog(res, s)
	}
	return res
}

func (s *share) add(ok bool) {
	s.total++
	if ok {
		s.ok++
	}
}

// startedIn reports whether a request started within a fault's span. Its
// end may be later: a request that hangs into the recovery counts too.
func startedIn(s span, rec record) bool {
	return s.from > 0 && rec.start >= s.from && rec.start <= s.to
}

// faultGrace is how long after a fault's end its effects may still be seen:
// the clock file is polled, buffers refill, clients reconnect.
const faultGrace = 3 * time.Second

// during names the fault a failed request overlapped, for the census.
func (r *run) during(rec record) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	near := func(s span) bool { return s.from > 0 && rec.end >= s.from && rec.start <= s.to+faultGrace }
	switch {
	case r.servers[rec.server].wasDown(rec.start, rec.end):
		return "server down or restarting"
	case rec.mode == snowflakeMode && int(rec.server) == r.clockServer && near(r.clockSpan):
		return "clock step on this server"
	case near(r.dbDown):
		return "mariadb outage"
	case near(r.regDown):
		return r.reg.name + " outage"
	case r.servers[rec.server].wasDown(rec.start-faultGrace, rec.end):
		return "just after a restart"
	}
	return "no fault"
}

// outages groups one sequential worker's failures into stretches, a
// failure less than a second after the one before joining its stretch, so
// that the summary shows how long each takeover took.
func (r *run) outages(fs []failure) []string {
	var out []string
	for i := 0; i < len(fs); {
		j := i + 1
		for j < len(fs) && fs[j].start-fs[j-1].end < time.Second {
			j++
		}
		servers := map[int8]int{}
		for _, f := range fs[i:j] {
			servers[f.server]++
		}
		var on []string
		for _, s := range slices.Sorted(maps.Keys(servers)) {
			on = append(on, fmt.Sprintf("leaf-%d×%d", s, servers[s]))
		}
		why := r.orderedExcuse(fs[i].record)
		if why == "" {
			why = "no fault"
		}
		out = append(out, fmt.Sprintf("%.1fs–%.1fs\t%d failed\t%s\t%s",
			fs[i].start.Seconds(), fs[j-1].end.Seconds(), j-i, strings.Join(on, " "), why))
		i = j
	}
	return out
}

// dupKey names a tag's IDs in the duplicate counts.
func (t tagSpec) dupKey() string { return t.mode().String() + " " + t.name }

// orderedExcuse names the window an ordered request met in which the tag
// may fail, "" if none. A server killed may have been the owner: its lease
// runs out at most ownerLease after the kill (it renewed before), and the
// others take over within ownerGrace after that; a restart of the owner is
// a new process, which waits out the old one's lease like the others. With
// the database out the owner cannot renew and stops issuing; after the
// outage (dbDown ends after the servers' retry) a server takes the lease
// again, at the latest once the old one has run out.
func (r *run) orderedExcuse(rec record) string {
	const w = ownerLease + ownerGrace
	for _, s := range r.servers {
		s.mu.Lock()
		downs := slices.Clone(s.downs)
		s.mu.Unlock()
		for _, d := range downs {
			if rec.end >= d.from && rec.start <= d.from+w {
				return fmt.Sprintf("owner lease after %s's kill", s.name)
			}
		}
	}
	r.mu.Lock()
	dbDown := r.dbDown
	r.mu.Unlock()
	if dbDown.from > 0 && rec.end >= dbDown.from && rec.start <= dbDown.to+w {
		return "mariadb outage + owner lease"
	}
	return ""
}

// countDups sorts ids and counts those that repeat.
func (r *run) countDups(res *results, what string, ids []int64) {
	slices.Sort(ids)
	n := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			n++
			if len(res.dupExamples) < 10 {
				res.dupExamples = append(res.dupExamples, fmt.Sprintf("%s %d", what, ids[i]))
			}
		}
	}
	res.dups[what] = n
	if n > 0 {
		res.problem("%d duplicate %s IDs, e.g. %s", n, what, strings.Join(res.dupExamples, ", "))
	}
}

// scanLog counts the server log lines a reader of the summary should know
// about. A warning about an unknown LEAF_* variable would mean the chaos
// build's clock variable leaks into serve's configuration check.
func (r *run) scanLog(res *results, s *leafServer) {
	f, err := os.Open(s.logPath)
	if err != nil {
		res.problem("read %s's log: %v", s.name, err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.Contains(line, []byte("unknown environment variable")):
			res.logWarnings["unknown environment variable"]++
			res.problem("%s warns: %s", s.name, line)
		case bytes.Contains(line, []byte("level=ERROR")):
			res.logWarnings[s.name+" ERROR lines"]++
		case bytes.Contains(line, []byte("panic")):
			res.logWarnings[s.name+" panics"]++
			res.problem("%s panicked: %s", s.name, line)
		}
	}
}

// summary is the run's report: volume, faults, errors, checks.
func (r *run) summary(res *results, load time.Duration) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	fmt.Fprintf(&b, "leaf chaos run: registry %s, %d servers, segment store over %d database(s), load %.1fs (asked %v)\n\n",
		r.registry, len(r.servers), r.databases, load.Seconds(), r.duration)

	fmt.Fprintln(tw, "IDs\trequests\tanswered\tIDs\tIDs/s\tduplicates")
	var requests, answered, total int
	for m := range modes {
		md := mode(m)
		if md == orderedMode && !r.ordered {
			continue
		}
		dups := res.dups["snowflake"]
		if md != snowflakeMode {
			dups = 0
			for _, t := range r.tags() {
				if t.mode() == md {
					dups += res.dups[t.dupKey()]
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%d\n", md, res.requests[m], res.ok[m], res.ids[m], float64(res.ids[m])/load.Seconds(), dups)
		requests, answered, total = requests+res.requests[m], answered+res.ok[m], total+res.ids[m]
	}
	for ti, t := range tags {
		if t.ordered && !r.ordered {
			continue
		}
		kind := ""
		if t.ordered {
			kind = ", ordered"
		}
		fmt.Fprintf(tw, "  %s (step %d%s)\t\t\t%d\t\t%d\n", t.name, t.step, kind, res.tagIDs[ti], res.dups[t.dupKey()])
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%.0f\t\n", requests, answered, total, float64(total)/load.Seconds())
	tw.Flush()

	b.WriteString("\nfaults\n")
	r.mu.Lock()
	faults := slices.Clone(r.faults)
	r.mu.Unlock()
	counts := map[string]int{}
	for _, f := range faults {
		counts[f.kind]++
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(tw, "  %s\t%d\n", k, counts[k])
	}
	tw.Flush()
	b.WriteString("\ntimeline\n")
	slices.SortFunc(faults, func(a, b fault) int { return cmp.Compare(a.span.from, b.span.from) })
	for _, f := range faults {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.span, f.kind, f.target, f.note)
	}
	tw.Flush()

	b.WriteString("\nrequests without IDs\n")
	keys := slices.SortedFunc(maps.Keys(res.census), func(a, b censusKey) int {
		return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.status, b.status), cmp.Compare(a.during, b.during), cmp.Compare(a.message, b.message))
	})
	if len(keys) == 0 {
		b.WriteString("  none\n")
	} else {
		fmt.Fprintln(tw, "  mode\tstatus\tduring\tcount\tallowed\tmessage")
	}
	for _, k := range keys {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%v\t%s\n", k.mode, k.status, k.during, res.census[k], k.allowed, k.message)
	}
	tw.Flush()

	b.WriteString("\nchecks\n")
	fmt.Fprintf(tw, "  duplicate IDs\t%d\n", sumValues(res.dups))
	fmt.Fprintf(tw, "  IDs out of order or range\t%d\n", res.violations)
	fmt.Fprintf(tw, "  segment requests started in the mariadb outage (+%v for the servers' retry) %v, servers up throughout\t%v\n", storeRetryMax, r.dbDown, res.dbOutage)
	fmt.Fprintf(tw, "  snowflake requests started in the %s outage %v, servers up throughout\t%v\n", r.reg.name, r.regDown, res.regOutage)
	if r.ordered {
		fmt.Fprintf(tw, "  ordered IDs out of order (one client, servers in turn)\t%d\n", res.orderedViolations)
		fmt.Fprintf(tw, "  ordered requests outside the owner-lease windows (kill + %v, mariadb outage + %v), servers up throughout\t%v\n",
			ownerLease+ownerGrace, ownerLease+ownerGrace, res.orderedClear)
		fmt.Fprintf(tw, "  ordered requests inside them\t%v (503 allowed)\n", res.orderedExcused)
		for _, o := range res.orderedOutages {
			fmt.Fprintf(tw, "    ordered failures\t%s\n", o)
		}
	}
	if r.clockServer >= 0 {
		fmt.Fprintf(tw, "  snowflake from leaf-%d during its clock step %v\t%v (503 expected until the clock passes the last ID)\n",
			r.clockServer, r.clockSpan, res.clockStepped)
	}
	var wids []string
	for _, wid := range slices.Sorted(maps.Keys(res.workerIDs)) {
		var on []string
		for i := range r.servers {
			if res.workerIDs[wid]&(1<<i) != 0 {
				on = append(on, fmt.Sprint("leaf-", i))
			}
		}
		wids = append(wids, fmt.Sprintf("%d (%s)", wid, strings.Join(on, " ")))
	}
	fmt.Fprintf(tw, "  snowflake worker IDs seen\t%s\n", strings.Join(wids, ", "))
	for _, s := range r.servers {
		s.mu.Lock()
		fmt.Fprintf(tw, "  %s restarts\t%d, %d failed start(s), start times %s\n", s.name, len(s.startedIn), s.failed, fmtDurations(s.startedIn))
		for _, m := range s.failMsgs {
			fmt.Fprintf(tw, "    failed start\t%s\n", m)
		}
		s.mu.Unlock()
	}
	for _, k := range slices.Sorted(maps.Keys(res.logWarnings)) {
		fmt.Fprintf(tw, "  log: %s\t%d\n", k, res.logWarnings[k])
	}
	tw.Flush()
	if len(res.disallowed) > 0 {
		b.WriteString("\nrequests that failed in a way the server does not promise (first " + fmt.Sprint(len(res.disallowed)) + ")\n")
		for _, d := range res.disallowed {
			b.WriteString("  " + d + "\n")
		}
	}
	if len(res.problems) == 0 {
		b.WriteString("\nresult: PASS\n")
	} else {
		b.WriteString("\nresult: FAIL\n")
		for _, p := range res.problems {
			b.WriteString("  " + p + "\n")
		}
	}
	return b.String()
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func fmtDurations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprintf("%.1fs", d.Seconds()))
	}
	return strings.Join(s, " ")
}
