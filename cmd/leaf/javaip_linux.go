package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"
)

// kernelInterfaces lists the IPv4 addresses of every interface, up or down,
// as the JDK on Linux reads them for NetworkInterface: the SIOCGIFCONF ioctl
// on an AF_INET socket, which walks the kernel's device list in its own
// order (creation, not index) and each device's addresses in order. An
// address labelled as an alias ("eth0:1") belongs to its device, as in the
// JDK's top-level list. It needs no netlink socket, which systemd's
// RestrictAddressFamilies (etc/leaf.service) does not allow.
func kernelInterfaces() ([]netIface, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	defer syscall.Close(fd)
	// A NULL buffer asks for the size needed; the list may grow before the
	// second call, and a full buffer may have been cut short: retry larger.
	var ifc ifconf
	if err := ioctlIfconf(fd, &ifc); err != nil {
		return nil, err
	}
	for size := int(ifc.len) + 4*ifreqSize; ; size *= 2 {
		if size > 1<<24 {
			return nil, fmt.Errorf("SIOCGIFCONF: more than %d bytes of addresses", size)
		}
		buf := make([]byte, size)
		ifc = ifconf{len: int32(size), buf: &buf[0]}
		err := ioctlIfconf(fd, &ifc)
		runtime.KeepAlive(buf)
		if err != nil {
			return nil, err
		}
		if n := int(ifc.len); n+ifreqSize <= size {
			return parseIfconf(buf[:n]), nil
		}
	}
}

// ifconf is struct ifconf: Go aligns buf as C aligns its pointer.
type ifconf struct {
	len int32
	buf *byte
}

// ifreqSize is sizeof(struct ifreq): the name, then a union whose largest
// member is struct ifmap (two longs and five bytes, padded to a long).
const ifreqSize = syscall.IFNAMSIZ + 2*int(unsafe.Sizeof(uintptr(0))) + 8

func ioctlIfconf(fd int, ifc *ifconf) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFCONF, uintptr(unsafe.Pointer(ifc))); errno != 0 {
		return os.NewSyscallError("ioctl SIOCGIFCONF", errno)
	}
	return nil
}

// parseIfconf reads SIOCGIFCONF's array of struct ifreq: a NUL-padded name,
// then a struct sockaddr_in (family in host order, port, address).
func parseIfconf(b []byte) []netIface {
	var out []netIface
	for ; len(b) >= ifreqSize; b = b[ifreqSize:] {
		name, _, _ := strings.Cut(string(b[:syscall.IFNAMSIZ]), "\x00")
		name, _, _ = strings.Cut(name, ":") // an alias label: its device
		sa := b[syscall.IFNAMSIZ:]
		if binary.NativeEndian.Uint16(sa) != syscall.AF_INET {
			continue
		}
		addr := netip.AddrFrom4([4]byte(sa[4:8]))
		if len(out) == 0 || out[len(out)-1].Name != name {
			out = append(out, netIface{Name: name})
		}
		out[len(out)-1].Addrs = append(out[len(out)-1].Addrs, addr)
	}
	return out
}
