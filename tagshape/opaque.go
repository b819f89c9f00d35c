package tagshape

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/leafgo/leaf"
)

// rounds is the number of Feistel rounds; even, so that the halves of an
// odd width end where they started.
const rounds = 10

// Key lengths, in bytes. The lower bound is AES-128's key size: a shorter key
// would be the weakest link. The upper bound only catches a pasted file.
const (
	MinKeyBytes = 16
	MaxKeyBytes = 64
)

// KeyCheckLen is the length of KeyCheck's answer, in hex digits.
const KeyCheckLen = 32

var (
	// ErrOutOfRange is wrapped by Encode and Decode for a number outside
	// [1, 2^bits). From Encode it means the tag has used up its width: a
	// range reserved past it must be refused, never wrapped around.
	ErrOutOfRange = errors.New("outside the opaque width")
	// ErrInvalidKey is wrapped by every error about a key. Those errors
	// give lengths and positions, never the key or any part of it.
	ErrInvalidKey = errors.New("invalid opaque key")
)

// Labels separate the uses of the key: a round key and the key check are
// HMACs of different messages, so one reveals nothing about the other.
const (
	permLabel     = "leaf opaque permutation v1\x00"
	keyCheckLabel = "leaf opaque key check v1"
)

// Perm is the permutation of one tag. It is immutable and safe for
// concurrent use.
type Perm struct {
	block cipher.Block
	bits  uint
	lo    uint   // width of the low half; the high half has bits-lo bits
	max   uint64 // 2^bits - 1, the largest ID
}

// NewPerm derives the permutation of tag's IDs at width bits from key, which
// ValidateKey must accept. bits is leaf.MinOpaqueBits..leaf.MaxOpaqueBits.
func NewPerm(key []byte, tag string, bits int) (*Perm, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := leaf.ValidateTag(tag); err != nil {
		return nil, err
	}
	if bits < leaf.MinOpaqueBits || bits > leaf.MaxOpaqueBits {
		return nil, fmt.Errorf("%w: opaque bits %d, want %d..%d", leaf.ErrInvalidArgument, bits, leaf.MinOpaqueBits, leaf.MaxOpaqueBits)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(permLabel))
	mac.Write([]byte{byte(bits)}) // one byte, so the tag that follows cannot be confused with it
	mac.Write([]byte(tag))
	sub := mac.Sum(nil)
	block, err := aes.NewCipher(sub[:16])
	clear(sub)
	if err != nil {
		return nil, fmt.Errorf("opaque: %w", err) // cannot happen: 16 bytes is an AES key size
	}
	return &Perm{block: block, bits: uint(bits), lo: uint(bits) - uint(bits)/2, max: 1<<uint(bits) - 1}, nil
}

// MaxOpaque is the largest ID at width bits, 2^bits - 1: the last raw ID an
// opaque tag may issue.
func MaxOpaque(bits int) int64 { return 1<<uint(bits) - 1 }

// Bits is the width of the permutation.
func (p *Perm) Bits() int { return int(p.bits) }

// Max is the largest ID the permutation takes and gives, 2^Bits() - 1.
func (p *Perm) Max() int64 { return int64(p.max) }

// String describes p without its key, so that a Perm logged by mistake
// shows nothing secret.
func (p *Perm) String() string { return fmt.Sprintf("opaque permutation of %d bits", p.bits) }

// GoString is String, for %#v.
func (p *Perm) GoString() string { return p.String() }

// Encode maps the raw ID x, in [1, Max()], to its opaque ID in the same
// range. Outside it, the error wraps ErrOutOfRange.
func (p *Perm) Encode(x int64) (int64, error) {
	if x < 1 || uint64(x) > p.max {
		return 0, fmt.Errorf("%w: ID %d is outside 1..%d (%d bits)", ErrOutOfRange, x, p.max, p.bits)
	}
	buf := blocks.Get().(*[aes.BlockSize]byte)
	y := p.feistel(uint64(x), buf)
	if y == 0 {
		y = p.feistel(0, buf)
	}
	blocks.Put(buf)
	return int64(y), nil
}

// Decode maps an opaque ID back to the raw ID Encode took. Every y in
// [1, Max()] has one, whether or not it was ever issued; outside, the error
// wraps both ErrOutOfRange and leaf.ErrInvalidArgument.
func (p *Perm) Decode(y int64) (int64, error) {
	if y < 1 || uint64(y) > p.max {
		return 0, fmt.Errorf("%w: %w: opaque ID %d is outside 1..%d (%d bits)", leaf.ErrInvalidArgument, ErrOutOfRange, y, p.max, p.bits)
	}
	buf := blocks.Get().(*[aes.BlockSize]byte)
	x := p.inverse(uint64(y), buf)
	if x == 0 {
		x = p.inverse(0, buf)
	}
	blocks.Put(buf)
	return int64(x), nil
}

// blocks holds the round function's buffers: cipher.Block is an interface,
// so a buffer passed to it escapes, and one allocated per call would cost
// an allocation per ID.
var blocks = sync.Pool{New: func() any { return new([aes.BlockSize]byte) }}

// feistel is the network on [0, 2^bits): (a, b) becomes (b, a ^ F(b)), the
// new half taking a's width.
func (p *Perm) feistel(x uint64, buf *[aes.BlockSize]byte) uint64 {
	hi := p.bits - p.lo
	a, b := x>>p.lo, x&(1<<p.lo-1)
	for i := range rounds {
		w := hi // a's width: the high half's in even rounds
		if i%2 == 1 {
			w = p.lo
		}
		a, b = b, (a^p.round(buf, i, b))&(1<<w-1)
	}
	return a<<p.lo | b
}

// inverse undoes feistel, round by round from the last.
func (p *Perm) inverse(y uint64, buf *[aes.BlockSize]byte) uint64 {
	hi := p.bits - p.lo
	a, b := y>>p.lo, y&(1<<p.lo-1)
	for i := rounds - 1; i >= 0; i-- {
		w := hi
		if i%2 == 1 {
			w = p.lo
		}
		a, b = (b^p.round(buf, i, a))&(1<<w-1), a
	}
	return a<<p.lo | b
}

// round is the round function: AES of (r, round, width), first 64 bits.
func (p *Perm) round(buf *[aes.BlockSize]byte, i int, r uint64) uint64 {
	binary.BigEndian.PutUint64(buf[:8], r)
	buf[8], buf[9] = byte(i), byte(p.bits)
	clear(buf[10:])
	p.block.Encrypt(buf[:], buf[:])
	return binary.BigEndian.Uint64(buf[:8])
}

// ValidateKey checks a key's length: MinKeyBytes..MaxKeyBytes, and not one
// byte repeated (a placeholder such as all zeros, not a key). The error
// wraps ErrInvalidKey and never shows the key.
func ValidateKey(key []byte) error {
	if len(key) < MinKeyBytes || len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: %d bytes, want %d..%d random bytes", ErrInvalidKey, len(key), MinKeyBytes, MaxKeyBytes)
	}
	for _, c := range key[1:] {
		if c != key[0] {
			return nil
		}
	}
	return fmt.Errorf("%w: one byte repeated %d times, not a random key", ErrInvalidKey, len(key))
}

// ParseKey reads a key's text form, the one its file, environment variable
// and YAML key hold: 2*MinKeyBytes..2*MaxKeyBytes hexadecimal digits (either
// case), nothing else, as `openssl rand -hex 32` writes. Errors wrap
// ErrInvalidKey and give lengths and positions, never a digit of the key.
func ParseKey(text string) ([]byte, error) {
	if text == "" {
		return nil, fmt.Errorf("%w: empty; want %d..%d hexadecimal digits (e.g. openssl rand -hex 32)", ErrInvalidKey, 2*MinKeyBytes, 2*MaxKeyBytes)
	}
	for i := 0; i < len(text); i++ {
		if !isHex(text[i]) {
			return nil, fmt.Errorf("%w: character %d is not a hexadecimal digit (0-9, a-f, A-F)", ErrInvalidKey, i+1)
		}
	}
	if len(text)%2 != 0 {
		return nil, fmt.Errorf("%w: an odd number (%d) of hexadecimal digits; want two per byte", ErrInvalidKey, len(text))
	}
	if len(text) < 2*MinKeyBytes || len(text) > 2*MaxKeyBytes {
		return nil, fmt.Errorf("%w: %d hexadecimal digits, want %d..%d (e.g. openssl rand -hex 32)", ErrInvalidKey, len(text), 2*MinKeyBytes, 2*MaxKeyBytes)
	}
	key, err := hex.DecodeString(text)
	if err != nil { // cannot happen after the checks above; never quote err, it names the byte
		return nil, fmt.Errorf("%w: not hexadecimal", ErrInvalidKey)
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return key, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// KeyCheck fingerprints key: KeyCheckLen hex digits of
// HMAC-SHA256(key, label). Servers compare it with the one stored with an
// opaque tag to refuse issuing under another key, and operators compare it
// across servers. It identifies the key without revealing it: HMAC is a PRF,
// so the fingerprint says nothing about a key of at least 128 random bits,
// and it shares no input with the round keys. At 128 bits two random keys
// share a fingerprint with probability 2^-128; 64 would do against chance,
// but the longer one also keeps a pair of keys crafted to collide (2^64
// work) out of reach, for the few more bytes it takes in the table.
func KeyCheck(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(keyCheckLabel))
	return hex.EncodeToString(mac.Sum(nil))[:KeyCheckLen]
}
