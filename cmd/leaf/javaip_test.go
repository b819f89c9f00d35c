package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// iface builds a netIface from "name addr addr ...".
func iface(spec string) netIface {
	f := strings.Fields(spec)
	ni := netIface{Name: f[0]}
	for _, a := range f[1:] {
		ni.Addrs = append(ni.Addrs, netip.MustParseAddr(a))
	}
	return ni
}

// TestJavaIP: the choice of Java Leaf's Utils.getIp over interfaces in the
// kernel's order, which the JDK reverses, interfaces and addresses alike.
func TestJavaIP(t *testing.T) {
	tests := []struct {
		name   string
		ifaces []string // kernel order
		want   []string // Java's order; getIp is the first, "" if none
	}{
		{"nothing", nil, nil},
		{"loopback only", []string{"lo 127.0.0.1"}, nil},
		{"one interface", []string{"lo 127.0.0.1", "eth0 10.0.0.5"}, []string{"10.0.0.5"}},
		// The classic two-NIC host: the JDK lists docker0, created after
		// eth0, first.
		{"eth0 and docker0", []string{"lo 127.0.0.1", "eth0 10.0.0.5", "docker0 172.17.0.1"}, []string{"172.17.0.1", "10.0.0.5"}},
		{"link-local counts", []string{"eth0 10.0.0.5", "eth1 169.254.10.20"}, []string{"169.254.10.20", "10.0.0.5"}},
		{"the last address of an interface first", []string{"eth0 10.0.0.5 10.0.0.6 192.168.1.9"},
			[]string{"192.168.1.9", "10.0.0.6", "10.0.0.5"}},
		{"loopback skipped wherever it is", []string{"eth0 10.0.0.5", "dummy0 127.1.2.3"}, []string{"10.0.0.5"}},
		{"IPv6 skipped", []string{"eth0 10.0.0.5", "eth1 fd00::1 2001:db8::7"}, []string{"10.0.0.5"}},
		{"an interface without addresses", []string{"eth0 10.0.0.5", "veth9"}, []string{"10.0.0.5"}},
		{"as in the namespace test", []string{"lo 127.0.0.1", "b0 10.11.0.1", "a0 10.10.0.1", "b1 169.254.7.7",
			"a1 10.12.0.1 10.13.0.1 10.12.0.2", "d0", "c0 127.1.2.3"},
			[]string{"10.12.0.2", "10.13.0.1", "10.12.0.1", "169.254.7.7", "10.10.0.1", "10.11.0.1"}},
	}
	for _, tt := range tests {
		var ifaces []netIface
		for _, s := range tt.ifaces {
			ifaces = append(ifaces, iface(s))
		}
		if got := javaIPs(ifaces); !slices.Equal(got, tt.want) {
			t.Errorf("%s: javaIPs = %q, want %q", tt.name, got, tt.want)
		}
		want := ""
		if len(tt.want) > 0 {
			want = tt.want[0]
		}
		if got := javaIP(ifaces); got != want {
			t.Errorf("%s: javaIP = %q, want %q", tt.name, got, want)
		}
	}
}
