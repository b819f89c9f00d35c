package main

import (
	"net"
	"net/netip"
)

// netIface is one network interface and its IPv4 addresses, in the order the
// kernel lists them.
type netIface struct {
	Name  string
	Addrs []netip.Addr
}

// javaIP is the address Java Leaf's Utils.getIp picks on this host: the first
// address that is neither loopback nor IPv6 over NetworkInterface's
// interfaces and their addresses. ifaces is in the kernel's order (its device
// list, and each device's address list), which the JDK on Linux reverses
// twice over: it builds both lists by prepending (NetworkInterface.c, addif),
// so the interface the kernel lists last comes first, and within it the
// address added last (a secondary address, an alias). Nothing else is
// filtered: link-local 169.254/16 counts, and so does an interface that is
// down. "" when no address qualifies; Java then registers ":port".
//
// The kernel's device list is in creation order, which is the order of
// interface indexes unless an index was chosen or a device moved in from
// another namespace; the Linux JDK reads it with SIOCGIFCONF, as
// kernelInterfaces does (javaip_linux.go).
func javaIP(ifaces []netIface) string {
	if ips := javaIPs(ifaces); len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// javaIPs lists, in the JDK's order, every address Utils.getHostAddress
// collects; getIp takes the first.
func javaIPs(ifaces []netIface) []string {
	var ips []string
	for i := len(ifaces) - 1; i >= 0; i-- {
		addrs := ifaces[i].Addrs
		for j := len(addrs) - 1; j >= 0; j-- {
			if a := addrs[j].Unmap(); a.Is4() && !a.IsLoopback() {
				ips = append(ips, a.String())
			}
		}
	}
	return ips
}

// defaultIP is the IP this server registers when snowflake.endpoint names
// none: Java Leaf's choice on the same host, so that a Go server taking over
// from a Java one keeps its ip:port and with it its worker ID.
func defaultIP() string {
	ifaces, err := kernelInterfaces()
	if err != nil {
		// Without the kernel's list, Go's, in index order, is the nearest.
		ifaces = goInterfaces()
	}
	return javaIP(ifaces)
}

// goInterfaces lists the interfaces' IPv4 addresses through package net:
// interfaces in index order, addresses in the kernel's order. nil if the
// interfaces cannot be read.
func goInterfaces() []netIface {
	list, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []netIface
	for _, ifc := range list {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		ni := netIface{Name: ifc.Name}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
					ni.Addrs = append(ni.Addrs, ip.Unmap())
				}
			}
		}
		out = append(out, ni)
	}
	return out
}
