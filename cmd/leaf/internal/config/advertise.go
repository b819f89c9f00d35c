package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// maxAdvertiseURLLen bounds advertise_url: with '#' and a process nonce it
// is the owner identity the stores keep of an ordered tag's owner.
const maxAdvertiseURLLen = 200

// ParseAdvertiseURL checks an advertise_url and returns it without a
// trailing slash: an absolute http or https URL with a host, and nothing
// after the port. Another server appends the route to it
// ("{url}/v2/segment/TAG/range"), and an owner's identity is the URL, a
// '#' and a nonce, so neither a path, a query nor a fragment has a place.
func ParseAdvertiseURL(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%q %s; want a base URL such as http://10.0.0.7:8080", s, why)
	}
	if len(s) > maxAdvertiseURLLen {
		return bad(fmt.Sprintf("is %d bytes, at most %d", len(s), maxAdvertiseURLLen))
	}
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return bad("has no http:// or https:// scheme")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || strings.TrimSpace(s) != s:
		return bad("is not a URL")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return bad("has no host")
	case u.User != nil:
		return bad("has user info")
	case u.Path != "" && u.Path != "/":
		return bad("has a path")
	case u.RawQuery != "" || u.ForceQuery:
		return bad("has a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return bad("has a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("has an invalid port")
		}
	}
	return strings.TrimSuffix(s, "/"), nil
}

// AdvertisedURL is the base URL this server is reached at: advertise_url
// when set, else built from the listen address and port, the port the
// listener bound (listen may say 0). A listen host that names one address
// or a host name is used as it is; one that listens on every interface
// ("", 0.0.0.0, ::) has no address to give, so detectIP picks one, as the
// snowflake endpoint's IP is picked (Java Leaf's Utils.getIp: the host's
// first non-loopback IPv4), and loopback when it finds none (a host
// without a network, where only local servers can reach this one). The
// scheme is https with TLS.
func (c Config) AdvertisedURL(port int, detectIP func() string) string {
	if c.AdvertiseURL != "" {
		u, err := ParseAdvertiseURL(c.AdvertiseURL)
		if err == nil {
			return u
		}
	}
	scheme := "http"
	if c.TLS.Enabled() {
		scheme = "https"
	}
	host, _, _ := net.SplitHostPort(c.Listen) // validated
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = ""
		if detectIP != nil {
			host = detectIP()
		}
		if host == "" {
			host = "127.0.0.1"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}
