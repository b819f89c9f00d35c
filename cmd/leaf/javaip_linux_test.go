package main

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// envJavaIPHelper makes TestHelperJavaIP print this process's choice.
const envJavaIPHelper = "LEAF_TEST_JAVAIP_HELPER"

// TestHelperJavaIP is not a test: TestJavaIPNetns runs the test binary with
// it inside a network namespace, where it prints what this server would
// register by default.
func TestHelperJavaIP(t *testing.T) {
	if os.Getenv(envJavaIPHelper) != "1" {
		t.Skip("helper process of TestJavaIPNetns")
	}
	ifaces, err := kernelInterfaces()
	if err != nil {
		fmt.Printf("ERROR=%v\n", err)
		return
	}
	ep, err := snowflakeEndpoint("", 8080)
	if err != nil {
		fmt.Printf("ERROR=%v\n", err)
		return
	}
	fmt.Printf("JAVAIPS=%s\nENDPOINT=%s\n", strings.Join(javaIPs(ifaces), ","), ep)
}

// leafGetIP is Java Leaf's Utils.getHostAddress(null) as a program: every
// address over NetworkInterface's interfaces and theirs, loopback and IPv6
// skipped, in order; Utils.getIp takes the first.
const leafGetIP = `import java.net.*;
import java.util.*;

public class LeafGetIp {
    public static void main(String[] args) throws Exception {
        List<String> ips = new ArrayList<>();
        Enumeration<NetworkInterface> ifaces = NetworkInterface.getNetworkInterfaces();
        while (ifaces != null && ifaces.hasMoreElements()) {
            Enumeration<InetAddress> addrs = ifaces.nextElement().getInetAddresses();
            while (addrs.hasMoreElements()) {
                InetAddress a = addrs.nextElement();
                if (a.isLoopbackAddress() || a instanceof Inet6Address) {
                    continue;
                }
                ips.add(a.getHostAddress());
            }
        }
        System.out.println("JAVAIPS=" + String.join(",", ips));
    }
}
`

// TestJavaIPNetns checks the default endpoint IP against what Java Leaf
// picks, on real interfaces: network namespaces holding veth pairs whose
// creation order is not their index order, a device with three addresses (a
// secondary, an alias), link-local, down and loopback addresses, an
// IPv6-only device, and a namespace with no IPv4 address but loopback. A
// helper process in each namespace prints this server's choice; when a JDK is
// installed, Leaf's own loop runs there too and must agree.
func TestJavaIPNetns(t *testing.T) {
	t.Parallel()
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + ": cannot build network namespaces to test the default snowflake IP on real interfaces"
		if os.Getenv("LEAF_TEST_STRICT") == "1" {
			t.Fatal(msg + " (LEAF_TEST_STRICT=1)")
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		skip("not root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("no ip command (iproute2)")
	}
	java := javaProgram(t)

	tests := []struct {
		name  string
		setup [][]string // ip -n NS ... commands
		want  []string   // Java's order
	}{
		{
			name: "several",
			setup: [][]string{
				{"link", "set", "lo", "up"},
				// A veth's peer is registered first: b0 (index 11) comes
				// before a0 (index 10) in the device list, and the JDK,
				// which reverses that list, puts a0 first.
				{"link", "add", "a0", "index", "10", "type", "veth", "peer", "name", "b0", "index", "11"},
				{"link", "add", "a1", "index", "12", "type", "veth", "peer", "name", "b1", "index", "13"},
				{"link", "add", "c0", "index", "30", "type", "veth", "peer", "name", "d0", "index", "31"},
				{"addr", "add", "10.10.0.1/24", "dev", "a0"},
				{"addr", "add", "10.11.0.1/24", "dev", "b0"},
				{"link", "set", "a0", "up"}, // b0 stays down
				{"addr", "add", "10.12.0.1/24", "dev", "a1"},
				{"addr", "add", "10.13.0.1/24", "dev", "a1", "label", "a1:5"},
				{"addr", "add", "10.12.0.2/24", "dev", "a1"}, // secondary
				{"addr", "add", "169.254.7.7/16", "dev", "b1"},
				{"addr", "add", "127.1.2.3/8", "dev", "c0"},
				{"addr", "add", "fd00::31/64", "dev", "d0", "nodad"},
			},
			// Index order, highest first, would start with b1's
			// 169.254.7.7; the old default, with 10.10.0.1.
			want: []string{"10.12.0.2", "10.13.0.1", "10.12.0.1", "169.254.7.7", "10.10.0.1", "10.11.0.1"},
		},
		{
			name: "none",
			setup: [][]string{
				{"link", "set", "lo", "up"},
				{"link", "add", "c0", "type", "veth", "peer", "name", "d0"},
				{"addr", "add", "127.1.2.3/8", "dev", "c0"},
				{"addr", "add", "fd00::31/64", "dev", "d0", "nodad"},
			},
			want: nil, // Java registers ":port"
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNetns(t, skip)
			for _, args := range tt.setup {
				if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("ip -n %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
				}
			}
			helper := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestHelperJavaIP$", "-test.count=1")
			helper.Env = append(os.Environ(), envJavaIPHelper+"=1")
			out, err := helper.CombinedOutput()
			if err != nil {
				t.Fatalf("helper in %s: %v\n%s", ns, err, out)
			}
			got := outputValues(string(out))
			if e, ok := got["ERROR"]; ok {
				t.Fatalf("helper: %s", e)
			}
			wantIPs, wantEP := strings.Join(tt.want, ","), ":8080"
			if len(tt.want) > 0 {
				wantEP = tt.want[0] + ":8080"
			}
			if got["JAVAIPS"] != wantIPs || got["ENDPOINT"] != wantEP {
				t.Errorf("in %s: addresses %q, endpoint %q; want %q, %q\n%s", tt.name, got["JAVAIPS"], got["ENDPOINT"], wantIPs, wantEP, addrList(ns))
			}
			if java == nil {
				return
			}
			jout, err := exec.Command("ip", append([]string{"netns", "exec", ns}, java...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("Java in %s: %v\n%s", ns, err, jout)
			}
			if j := outputValues(string(jout))["JAVAIPS"]; j != wantIPs {
				t.Errorf("in %s: Java Leaf's loop lists %q, this test expects %q\n%s", tt.name, j, wantIPs, addrList(ns))
			}
		})
	}
}

// newNetns makes a network namespace that t's cleanup deletes.
func newNetns(t *testing.T, skip func(string, ...any)) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "leaf-test-" + hex.EncodeToString(b[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		skip("ip netns add %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", ns, err, out)
		}
	})
	return ns
}

// javaProgram compiles leafGetIP and returns the command that runs it, or
// nil (logged) without a JDK.
func javaProgram(t *testing.T) []string {
	t.Helper()
	javac, err1 := exec.LookPath("javac")
	java, err2 := exec.LookPath("java")
	if err1 != nil || err2 != nil {
		t.Log("no JDK (javac, java): the expected choices are not checked against Java itself")
		return nil
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "LeafGetIp.java")
	if err := os.WriteFile(src, []byte(leafGetIP), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javac, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return []string{java, "-cp", dir, "LeafGetIp"}
}

// outputValues reads the KEY=value lines of a helper's output.
func outputValues(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k != "" && strings.ToUpper(k) == k && !strings.Contains(k, " ") {
			m[k] = v
		}
	}
	return m
}

// addrList is the namespace's addresses, for a failure message.
func addrList(ns string) string {
	out, _ := exec.Command("ip", "-n", ns, "-o", "addr").CombinedOutput()
	return string(out)
}

// TestParseIfconf reads a SIOCGIFCONF answer built by hand: an alias label
// belongs to its device, and an entry of another family is skipped.
func TestParseIfconf(t *testing.T) {
	entry := func(name string, family uint16, ip string) []byte {
		b := make([]byte, ifreqSize)
		copy(b, name)
		binary.NativeEndian.PutUint16(b[syscall.IFNAMSIZ:], family)
		a := netip.MustParseAddr(ip).As4()
		copy(b[syscall.IFNAMSIZ+4:], a[:])
		return b
	}
	buf := slices.Concat(
		entry("lo", syscall.AF_INET, "127.0.0.1"),
		entry("eth0", syscall.AF_INET, "10.0.0.1"),
		entry("eth0:1", syscall.AF_INET, "10.0.0.9"),
		entry("eth0", syscall.AF_INET6, "10.0.0.99"),
		entry("docker0", syscall.AF_INET, "172.17.0.1"),
	)
	got := parseIfconf(append(buf, 1, 2, 3)) // a torn entry at the end is ignored
	want := []netIface{iface("lo 127.0.0.1"), iface("eth0 10.0.0.1 10.0.0.9"), iface("docker0 172.17.0.1")}
	if !slices.EqualFunc(got, want, func(a, b netIface) bool { return a.Name == b.Name && slices.Equal(a.Addrs, b.Addrs) }) {
		t.Errorf("parseIfconf = %v, want %v", got, want)
	}
}
