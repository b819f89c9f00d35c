package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/leafgo/leaf/client"
)

// serverFlag is --server of 'leaf get' and 'leaf bench': repeated or
// comma-separated, each entry a base URL, optionally after its zone
// ("dc1=http://10.0.0.1:8080").
type serverFlag []string

func (f *serverFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ",")
}

func (f *serverFlag) Set(v string) error {
	if v != "" { // as before lists: --server "" leaves the default
		*f = append(*f, strings.Split(v, ",")...)
	}
	return nil
}

const serverFlagUsage = "base `URL` of the server, optionally after its zone (dc1=http://10.0.0.1:8080); " +
	"repeat the flag or separate with commas to name several (default $" + envServer + ", else " + defaultServer + ")"

const zoneFlagUsage = "the client's own `ZONE`: prefer the --server entries given as ZONE=URL, use the others while all of them fail"

// servers is who the client commands talk to.
type servers struct {
	// one is a single server named without zones: the commands talk to it
	// as they always have.
	one *url.URL
	// eps are several servers, or servers in zones: the commands go
	// through the Go client (package client, the /v2 routes), with its
	// failover and, with zone, its zone preference.
	eps  []client.Endpoint
	zone string
}

// resolveServers reads --server (else $LEAF_SERVER, else the default) and
// --zone, and checks them as the client will.
func (a *app) resolveServers(flag serverFlag, zone string) (servers, error) {
	entries := []string(flag)
	if len(entries) == 0 {
		entries = strings.Split(cmp.Or(lookupEnv(a.env, envServer), defaultServer), ",")
	}
	if err := client.ValidateZone(zone); err != nil {
		return servers{}, usageErrorf("--zone %q is not 1 to 64 letters, digits, '.', '_' or '-'", zone)
	}
	var s servers
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			return servers{}, usageErrorf("--server %q has an empty entry", strings.Join(entries, ","))
		}
		ez, rest, zoned := splitZone(e)
		if zoned && (ez == "" || client.ValidateZone(ez) != nil) {
			return servers{}, usageErrorf("--server %q: the zone before '=' is not 1 to 64 letters, digits, '.', '_' or '-'", e)
		}
		u, err := parseServer(rest)
		if err != nil {
			return servers{}, err
		}
		if len(entries) == 1 && !zoned && zone == "" {
			return servers{one: u}, nil
		}
		s.eps = append(s.eps, client.Endpoint{URL: u.String(), Zone: ez})
	}
	if zone != "" && !slices.ContainsFunc(s.eps, func(e client.Endpoint) bool { return e.Zone == zone }) {
		return servers{}, usageErrorf("--zone %q: no --server is in that zone (%s)", zone, zonesOf(s.eps))
	}
	s.zone = zone
	// The client checks what is left: duplicates, query strings, user info.
	if _, err := client.NewZoned(s.eps, client.WithZone(zone)); err != nil {
		return servers{}, usageErrorf("--server: %s", strings.TrimPrefix(err.Error(), "leaf client: invalid argument: "))
	}
	return s, nil
}

// splitZone cuts "dc1=http://h:1" into its zone and URL. An '=' after the
// scheme's "://" belongs to the URL.
func splitZone(e string) (zone, rest string, zoned bool) {
	i := strings.IndexByte(e, '=')
	if j := strings.Index(e, "://"); i < 0 || (j >= 0 && j < i) {
		return "", e, false
	}
	return e[:i], e[i+1:], true
}

// zonesOf names the zones of eps for a message.
func zonesOf(eps []client.Endpoint) string {
	var zones []string
	for _, e := range eps {
		if e.Zone != "" && !slices.Contains(zones, e.Zone) {
			zones = append(zones, e.Zone)
		}
	}
	if len(zones) == 0 {
		return "none has a zone; give them as ZONE=URL"
	}
	return "zones: " + strings.Join(zones, ", ")
}

// newClient is the Go client of s, logging its warnings (a server
// failing, calls leaving the zone) to w.
func (s servers) newClient(w io.Writer, opts ...client.Option) (*client.Client, error) {
	opts = append([]client.Option{client.WithZone(s.zone), client.WithLogger(warnLogger(w))}, opts...)
	return client.NewZoned(s.eps, opts...)
}

// warnLogger writes Warn lines and above to w, without timestamps: they
// go to a terminal next to the command's own messages.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// httpsOnly checks that every server of s is https://, for --cacert.
func (s servers) httpsOnly() error {
	if s.one != nil {
		if s.one.Scheme != "https" {
			return fmt.Errorf("%s is plain HTTP", s.one.Redacted())
		}
		return nil
	}
	for _, e := range s.eps {
		if !strings.HasPrefix(e.URL, "https://") {
			return fmt.Errorf("%s is plain HTTP", e.URL)
		}
	}
	return nil
}
