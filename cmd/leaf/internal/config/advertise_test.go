package config

import (
	"strings"
	"testing"
)

func TestParseAdvertiseURL(t *testing.T) {
	for _, tt := range []struct{ in, want, err string }{
		{in: "http://10.0.0.7:8080", want: "http://10.0.0.7:8080"},
		{in: "https://leaf-0.leaf.svc:8443/", want: "https://leaf-0.leaf.svc:8443"},
		{in: "http://[fd00::7]:8080", want: "http://[fd00::7]:8080"},
		{in: "http://leaf", want: "http://leaf"},
		{in: "", err: "no http:// or https:// scheme"},
		{in: "10.0.0.7:8080", err: "no http:// or https:// scheme"},
		{in: "ftp://10.0.0.7", err: "no http:// or https:// scheme"},
		{in: "http://", err: "no host"},
		{in: "http://:8080", err: "no host"},
		{in: "http://u:p@10.0.0.7:8080", err: "user info"},
		{in: "http://10.0.0.7:8080/leaf", err: "has a path"},
		{in: "http://10.0.0.7:8080?x=1", err: "has a query"},
		{in: "http://10.0.0.7:8080#n", err: "has a fragment"},
		{in: "http://10.0.0.7:0", err: "invalid port"},
		{in: "http://10.0.0.7:99999", err: "invalid port"},
		{in: "http://10.0.0.7 ", err: "is not a URL"},
		{in: "http://" + strings.Repeat("a", 200), err: "at most 200"},
	} {
		got, err := ParseAdvertiseURL(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseAdvertiseURL(%q) = %q, %v; want an error saying %q", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseAdvertiseURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestAdvertisedURL(t *testing.T) {
	detect := func() string { return "10.1.2.3" }
	none := func() string { return "" }
	for _, tt := range []struct {
		name      string
		listen    string
		advertise string
		tls       bool
		detect    func() string
		want      string
	}{
		{name: "set", listen: "0.0.0.0:8080", advertise: "http://leaf-0:8080/", detect: detect, want: "http://leaf-0:8080"},
		{name: "loopback", listen: "127.0.0.1:0", detect: detect, want: "http://127.0.0.1:41000"},
		{name: "one IP", listen: "10.9.9.9:8080", detect: detect, want: "http://10.9.9.9:41000"},
		{name: "IPv6", listen: "[fd00::1]:8080", detect: detect, want: "http://[fd00::1]:41000"},
		{name: "host name", listen: "leaf-0.leaf:8080", detect: detect, want: "http://leaf-0.leaf:41000"},
		{name: "every interface", listen: ":8080", detect: detect, want: "http://10.1.2.3:41000"},
		{name: "0.0.0.0", listen: "0.0.0.0:8080", detect: detect, want: "http://10.1.2.3:41000"},
		{name: "::", listen: "[::]:8080", detect: detect, want: "http://10.1.2.3:41000"},
		{name: "no IP found", listen: "0.0.0.0:8080", detect: none, want: "http://127.0.0.1:41000"},
		{name: "TLS", listen: "0.0.0.0:8443", tls: true, detect: detect, want: "https://10.1.2.3:41000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Listen, c.AdvertiseURL = tt.listen, tt.advertise
			if tt.tls {
				c.TLS = TLS{Cert: "c.pem", Key: "k.pem"}
			}
			if got := c.AdvertisedURL(41000, tt.detect); got != tt.want {
				t.Errorf("AdvertisedURL = %q, want %q", got, tt.want)
			}
		})
	}
}
