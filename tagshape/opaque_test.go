package tagshape

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leafgo/leaf"
)

// keyText is recognisable, so that a test can look for it (or any piece of
// it) in what the package writes.
const keyText = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e7000111222333444555666777888f"

func testKey(t testing.TB) []byte {
	t.Helper()
	key, err := ParseKey(keyText)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newPerm(t testing.TB, key []byte, tag string, bits int) *Perm {
	t.Helper()
	p, err := NewPerm(key, tag, bits)
	if err != nil {
		t.Fatalf("NewPerm(%s, %d): %v", tag, bits, err)
	}
	return p
}

// TestBijectiveExhaustive maps every ID of the smallest widths, an even and
// an odd one (whose halves differ by a bit): every image is an ID, none is
// hit twice, and Decode gives back the ID.
func TestBijectiveExhaustive(t *testing.T) {
	t.Parallel()
	for _, bits := range []int{16, 17} {
		t.Run(fmt.Sprint(bits), func(t *testing.T) {
			t.Parallel()
			p := newPerm(t, testKey(t), "orders", bits)
			maxID := int64(1)<<bits - 1
			if p.Max() != maxID || MaxOpaque(bits) != maxID || p.Bits() != bits {
				t.Fatalf("Max = %d, Max(%d) = %d, Bits = %d; want %d and %d", p.Max(), bits, MaxOpaque(bits), p.Bits(), maxID, bits)
			}
			hit := make([]bool, maxID+1)
			moved := 0
			for x := int64(1); x <= maxID; x++ {
				y, err := p.Encode(x)
				if err != nil {
					t.Fatalf("Encode(%d): %v", x, err)
				}
				if y < 1 || y > maxID {
					t.Fatalf("Encode(%d) = %d, outside 1..%d", x, y, maxID)
				}
				if hit[y] {
					t.Fatalf("Encode(%d) = %d, the image of another ID too", x, y)
				}
				hit[y] = true
				if y != x {
					moved++
				}
				if back, err := p.Decode(y); err != nil || back != x {
					t.Fatalf("Decode(Encode(%d) = %d) = %d, %v", x, y, back, err)
				}
			}
			// A permutation that left most IDs in place would be a bijection
			// too; a random one fixes about one.
			if moved < int(maxID)-10 {
				t.Errorf("%d of %d IDs map to themselves", int(maxID)-moved, maxID)
			}
		})
	}
}

// TestBijectiveFullWidth maps 10M IDs at 63 bits (and 2M at 40): the first
// ones, as a tag issues them, and the last ones, at the top of the width.
// Every image is in range, no two are equal, and Decode inverts. About 5s
// on two shared cores; -short maps a tenth as many.
func TestBijectiveFullWidth(t *testing.T) {
	t.Parallel()
	scale := int64(1)
	if testing.Short() {
		scale = 10
	}
	for _, c := range []struct {
		bits int
		n    int64
	}{{63, 10_000_000 / scale}, {40, 2_000_000 / scale}} {
		t.Run(fmt.Sprint(c.bits), func(t *testing.T) {
			p := newPerm(t, testKey(t), "orders", c.bits)
			maxID := p.Max()
			low := c.n * 9 / 10 // IDs 1..low, then the top n-low IDs up to maxID
			input := func(i int64) int64 {
				if i < low {
					return 1 + i
				}
				return maxID - (i - low)
			}
			out := make([]int64, c.n)
			workers := runtime.GOMAXPROCS(0)
			var wg sync.WaitGroup
			errs := make([]error, workers)
			for w := range workers {
				wg.Go(func() {
					for i := int64(w); i < c.n; i += int64(workers) {
						x := input(i)
						y, err := p.Encode(x)
						if err == nil && (y < 1 || y > maxID) {
							err = fmt.Errorf("Encode(%d) = %d, outside 1..%d", x, y, maxID)
						}
						if err == nil {
							var back int64
							if back, err = p.Decode(y); err == nil && back != x {
								err = fmt.Errorf("Decode(Encode(%d) = %d) = %d", x, y, back)
							}
						}
						if err != nil {
							errs[w] = err
							return
						}
						out[i] = y
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			slices.Sort(out)
			for i := 1; i < len(out); i++ {
				if out[i] == out[i-1] {
					t.Fatalf("two IDs map to %d", out[i])
				}
			}
		})
	}
}

// TestOutOfRange: 0, negative numbers and numbers past the width are
// refused both ways, with ErrOutOfRange (and, decoding, ErrInvalidArgument).
func TestOutOfRange(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	for _, bits := range []int{16, 17, 40, 62, 63} {
		p := newPerm(t, key, "orders", bits)
		bad := []int64{0, -1, math.MinInt64}
		if bits < 63 {
			bad = append(bad, MaxOpaque(bits)+1, math.MaxInt64)
		}
		for _, x := range bad {
			if y, err := p.Encode(x); !errors.Is(err, ErrOutOfRange) || errors.Is(err, leaf.ErrInvalidArgument) {
				t.Errorf("%d bits: Encode(%d) = %d, %v; want ErrOutOfRange only", bits, x, y, err)
			} else if want := fmt.Sprintf("ID %d is outside 1..%d (%d bits)", x, MaxOpaque(bits), bits); !strings.Contains(err.Error(), want) {
				t.Errorf("%d bits: Encode(%d): %q does not say %q", bits, x, err, want)
			}
			if y, err := p.Decode(x); !errors.Is(err, ErrOutOfRange) || !errors.Is(err, leaf.ErrInvalidArgument) {
				t.Errorf("%d bits: Decode(%d) = %d, %v; want ErrOutOfRange and ErrInvalidArgument", bits, x, y, err)
			}
		}
		for _, x := range []int64{1, MaxOpaque(bits)} {
			if _, err := p.Encode(x); err != nil {
				t.Errorf("%d bits: Encode(%d): %v", bits, x, err)
			}
			if _, err := p.Decode(x); err != nil {
				t.Errorf("%d bits: Decode(%d): %v", bits, x, err)
			}
		}
	}
}

// TestStable pins outputs: the permutation is part of the data. A change
// of construction, rounds, labels or key derivation would map new raw IDs
// onto opaque IDs already issued, so it must fail here. The values were
// computed by a separate implementation of the package doc's construction
// (Python, with the cryptography package's AES), not by this one.
func TestStable(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	for _, c := range []struct {
		tag  string
		bits int
		x    []int64
		want []int64
	}{
		// 23727 and 98740 are the IDs the network sends to 0: they take
		// the image of 0 instead.
		{"orders", 16, []int64{1, 2, 3, 65535, 23727}, []int64{36919, 22915, 40296, 38702, 55685}},
		{"orders", 17, []int64{1, 2, 3, 131071, 98740}, []int64{113071, 79915, 54347, 12733, 108293}},
		{"orders", 40, []int64{1, 2, 3, 1 << 39}, []int64{1048420027532, 726111847463, 235810683990, 472787433596}},
		{"orders", 63, []int64{1, 2, 3, math.MaxInt64}, []int64{7166473550789855263, 171948091040289244, 9103304963191007311, 1227182635568954817}},
		{"users", 63, []int64{1, 2, 3, math.MaxInt64}, []int64{6936960508683991232, 5777810655053862224, 6511300786095156347, 6422384960572454893}},
	} {
		p := newPerm(t, key, c.tag, c.bits)
		var got []int64
		for _, x := range c.x {
			y, err := p.Encode(x)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, y)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s at %d bits: Encode(%v) = %#v, want %#v", c.tag, c.bits, c.x, got, c.want)
		}
	}
	if got, want := KeyCheck(key), "9010f9bec1385b9275c393416ae56bca"; got != want {
		t.Errorf("KeyCheck = %q, want %q", got, want)
	}
}

// TestDistinctPermutations: another key, tag or width gives another
// permutation, so tags do not share their order and a server with another
// key issues other IDs.
func TestDistinctPermutations(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	other := slices.Clone(key)
	other[len(other)-1] ^= 1
	base := newPerm(t, key, "orders", 40)
	for _, c := range []struct {
		name string
		p    *Perm
	}{
		{"key differing in one bit", newPerm(t, other, "orders", 40)},
		{"another tag", newPerm(t, key, "orders2", 40)},
		{"another width", newPerm(t, key, "orders", 41)},
	} {
		same := 0
		for x := int64(1); x <= 10000; x++ {
			a, _ := base.Encode(x)
			b, _ := c.p.Encode(x)
			if a == b {
				same++
			}
		}
		if same > 0 {
			t.Errorf("%s: %d of 10000 IDs map as with the base permutation", c.name, same)
		}
	}
	// At 16 bits a random pair of permutations agrees on about one ID.
	a, b := newPerm(t, key, "orders", 16), newPerm(t, key, "users", 16)
	same := 0
	for x := int64(1); x <= a.Max(); x++ {
		ya, _ := a.Encode(x)
		yb, _ := b.Encode(x)
		if ya == yb {
			same++
		}
	}
	if same > 8 {
		t.Errorf("16 bits: tags orders and users agree on %d of %d IDs", same, a.Max())
	}
}

// TestHammer encodes disjoint ranges from many goroutines at once, as the
// generator's callers do: every ID maps to a distinct ID and decodes back,
// so the shared buffers never mix two calls.
func TestHammer(t *testing.T) {
	t.Parallel()
	const goroutines, per = 16, 50_000
	p := newPerm(t, testKey(t), "orders", 40)
	results := make([][]int64, goroutines)
	errs := make([]error, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			out := make([]int64, 0, per)
			for x := int64(g*per + 1); x <= int64((g+1)*per); x++ {
				y, err := p.Encode(x)
				if err != nil {
					errs[g] = err
					return
				}
				if back, err := p.Decode(y); err != nil || back != x {
					errs[g] = fmt.Errorf("Decode(Encode(%d) = %d) = %d, %v", x, y, back, err)
					return
				}
				out = append(out, y)
			}
			results[g] = out
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]bool, goroutines*per)
	for _, out := range results {
		for _, y := range out {
			if seen[y] {
				t.Fatalf("%d issued twice", y)
			}
			seen[y] = true
		}
	}
	if len(seen) != goroutines*per {
		t.Fatalf("%d IDs, want %d", len(seen), goroutines*per)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	for _, c := range []struct {
		name string
		key  []byte
		tag  string
		bits int
		want error
		msg  string
	}{
		{"15 bits", key, "orders", 15, leaf.ErrInvalidArgument, "opaque bits 15, want 16..63"},
		{"64 bits", key, "orders", 64, leaf.ErrInvalidArgument, "opaque bits 64, want 16..63"},
		{"0 bits", key, "orders", 0, leaf.ErrInvalidArgument, "opaque bits 0"},
		{"empty tag", key, "", 40, leaf.ErrInvalidTag, "empty"},
		{"bad tag", key, "a/b", 40, leaf.ErrInvalidTag, "offset 1"},
		{"short key", key[:15], "orders", 40, ErrInvalidKey, "15 bytes, want 16..64"},
		{"no key", nil, "orders", 40, ErrInvalidKey, "0 bytes"},
	} {
		p, err := NewPerm(c.key, c.tag, c.bits)
		if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.msg) {
			t.Errorf("%s: NewPerm = %v, %v; want %v saying %q", c.name, p, err, c.want, c.msg)
		}
		checkNoSecret(t, c.name, fmt.Sprint(err))
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	upper := strings.ToUpper(keyText)
	for _, c := range []struct {
		name, text string
		msg        string // "" for a good key
	}{
		{"lower case", keyText, ""},
		{"upper case", upper, ""},
		{"16 bytes", keyText[:32], ""},
		{"64 bytes", keyText + keyText, ""},
		{"empty", "", "empty"},
		{"15 bytes", keyText[:30], "30 hexadecimal digits, want 32..128"},
		{"65 bytes", keyText + keyText + "ab", "130 hexadecimal digits, want 32..128"},
		{"odd", keyText[:33], "an odd number (33) of hexadecimal digits"},
		{"leading space", " " + keyText, "character 1 is not a hexadecimal digit"},
		{"newline", keyText + "\n", "character 65 is not a hexadecimal digit"},
		{"0x prefix", "0x" + keyText, "character 2 is not"},
		{"base64", "XsfnXsfnXsfnXsfnXsfnXsfnXsfnXsfn", "character 1 is not"},
		{"one byte repeated", strings.Repeat("00", 32), "one byte repeated 32 times"},
	} {
		key, err := ParseKey(c.text)
		if c.msg == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if want, _ := hex.DecodeString(strings.ToLower(c.text)); !slices.Equal(key, want) {
				t.Errorf("%s: ParseKey gives other bytes", c.name)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidKey) || !strings.Contains(fmt.Sprint(err), c.msg) {
			t.Errorf("%s: ParseKey = %v; want ErrInvalidKey saying %q", c.name, err, c.msg)
		}
		checkNoSecret(t, c.name, fmt.Sprint(err))
	}
	if k1, k2 := KeyCheck(testKey(t)), KeyCheck(mustParse(t, upper)); k1 != k2 {
		t.Errorf("a key in upper case has another key check")
	}
}

func mustParse(t *testing.T, text string) []byte {
	t.Helper()
	key, err := ParseKey(text)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestValidateKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int
		fill func(i int) byte
		ok   bool
	}{
		{16, func(i int) byte { return byte(i) }, true},
		{64, func(i int) byte { return byte(i) }, true},
		{15, func(i int) byte { return byte(i) }, false},
		{65, func(i int) byte { return byte(i) }, false},
		{32, func(int) byte { return 0 }, false},
		{32, func(int) byte { return 0xff }, false},
	} {
		key := make([]byte, c.n)
		for i := range key {
			key[i] = c.fill(i)
		}
		if err := ValidateKey(key); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidKey)) {
			t.Errorf("%d bytes starting %#x: ValidateKey = %v, want ok %t", c.n, key[0], err, c.ok)
		}
	}
}

// TestKeyCheck: the fingerprint is stable (TestStable pins it), differs per
// key, and shows nothing of the key or the round keys.
func TestKeyCheck(t *testing.T) {
	t.Parallel()
	key := testKey(t)
	kc := KeyCheck(key)
	if len(kc) != KeyCheckLen || strings.Trim(kc, "0123456789abcdef") != "" {
		t.Errorf("KeyCheck = %q, want %d lower-case hex digits", kc, KeyCheckLen)
	}
	if KeyCheck(slices.Clone(key)) != kc {
		t.Errorf("KeyCheck is not a function of the key")
	}
	seen := map[string]int{kc: -1}
	for i := range key {
		other := slices.Clone(key)
		other[i] ^= 0x80
		c := KeyCheck(other)
		if j, dup := seen[c]; dup {
			t.Errorf("keys differing in byte %d and %d share the check %s", i, j, c)
		}
		seen[c] = i
	}
	checkNoSecret(t, "KeyCheck", kc)
}

// TestPermShowsNoKey: a Perm printed by mistake, in any verb, shows neither
// the key nor the round key.
func TestPermShowsNoKey(t *testing.T) {
	t.Parallel()
	p := newPerm(t, testKey(t), "orders", 40)
	out := fmt.Sprintf("%v %+v %#v %s %v %+v", p, p, p, p, *p, *p)
	if !strings.Contains(out, "opaque permutation of 40 bits") {
		t.Errorf("%%v of a Perm = %q", out)
	}
	checkNoSecret(t, "Perm formatted", out)
	mac := hmac.New(sha256.New, testKey(t))
	mac.Write([]byte(permLabel + "\x28orders"))
	if sub := hex.EncodeToString(mac.Sum(nil)[:16]); strings.Contains(out, sub[:8]) {
		t.Errorf("the round key shows: %s", out)
	}
}

// checkNoSecret fails if s holds any 8 hex digits of keyText, in either
// case: a message may show no part of the key.
func checkNoSecret(t *testing.T, what, s string) {
	t.Helper()
	lower := strings.ToLower(s)
	for i := 0; i+8 <= len(keyText); i++ {
		if strings.Contains(lower, keyText[i:i+8]) {
			t.Errorf("%s shows part of the key (%s): %s", what, keyText[i:i+8], s)
			return
		}
	}
}

// FuzzOpaqueRoundTrip: any number either round-trips at any width or is refused
// as out of range.
func FuzzOpaqueRoundTrip(f *testing.F) {
	key := testKey(f)
	perms := map[int]*Perm{}
	for bits := leaf.MinOpaqueBits; bits <= leaf.MaxOpaqueBits; bits++ {
		perms[bits] = newPerm(f, key, "fuzz", bits)
	}
	f.Add(int64(1), uint8(16))
	f.Add(int64(0), uint8(40))
	f.Add(int64(math.MaxInt64), uint8(63))
	f.Add(int64(1<<40), uint8(40))
	f.Fuzz(func(t *testing.T, x int64, b uint8) {
		bits := leaf.MinOpaqueBits + int(b)%(leaf.MaxOpaqueBits-leaf.MinOpaqueBits+1)
		p := perms[bits]
		y, err := p.Encode(x)
		if x < 1 || x > p.Max() {
			if !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("%d bits: Encode(%d) = %d, %v; want ErrOutOfRange", bits, x, y, err)
			}
			return
		}
		if err != nil || y < 1 || y > p.Max() {
			t.Fatalf("%d bits: Encode(%d) = %d, %v", bits, x, y, err)
		}
		if back, err := p.Decode(y); err != nil || back != x {
			t.Fatalf("%d bits: Decode(Encode(%d) = %d) = %d, %v", bits, x, y, back, err)
		}
	})
}

var sink int64

func BenchmarkEncode(b *testing.B) {
	for _, bits := range []int{16, 40, 63} {
		b.Run(fmt.Sprint(bits), func(b *testing.B) {
			p := newPerm(b, testKey(b), "orders", bits)
			b.ReportAllocs()
			x := int64(1)
			for b.Loop() {
				sink, _ = p.Encode(x)
				if x++; x > p.Max() {
					x = 1
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	p := newPerm(b, testKey(b), "orders", 63)
	b.ReportAllocs()
	y := int64(1)
	for b.Loop() {
		sink, _ = p.Decode(y)
		y++
	}
}

func BenchmarkEncodeParallel(b *testing.B) {
	p := newPerm(b, testKey(b), "orders", 63)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var s int64
		x := int64(1)
		for pb.Next() {
			y, _ := p.Encode(x)
			s += y
			x++
		}
		sink = s
	})
}

// BenchmarkRoundFunction compares the round function with the HMAC-SHA256
// one it was chosen over (see the package doc).
func BenchmarkRoundFunction(b *testing.B) {
	p := newPerm(b, testKey(b), "orders", 63)
	b.Run("aes", func(b *testing.B) {
		buf := new([16]byte)
		var r uint64
		for b.Loop() {
			r = p.round(buf, 3, r)
		}
		sink = int64(r)
	})
	b.Run("hmac-sha256", func(b *testing.B) {
		mac := hmac.New(sha256.New, testKey(b))
		var in [10]byte
		sum := make([]byte, 0, sha256.Size)
		for b.Loop() {
			mac.Reset()
			mac.Write(in[:])
			sum = mac.Sum(sum[:0])
			in[0] = sum[0]
		}
	})
}
