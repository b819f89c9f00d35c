package leaf

import (
	"context"
	"fmt"
	"strconv"
)

// MaxTagLen is the longest tag name, in bytes (the width of leaf_alloc.biz_tag).
const MaxTagLen = 128

// MaxBatch is the largest number of IDs one request may ask for.
const MaxBatch = 10000

// Generator issues one ID at a time for a key (a segment tag; snowflake ignores it).
type Generator interface {
	NextID(ctx context.Context, key string) (int64, error)
}

// BatchGenerator issues n IDs at once, appended to dst in increasing order.
type BatchGenerator interface {
	NextIDs(ctx context.Context, key string, n int, dst []int64) ([]int64, error)
}

// ValidateTag reports whether tag is a valid tag name: 1–128 bytes of
// [A-Za-z0-9._:-]. The check runs before a tag reaches any store.
func ValidateTag(tag string) error {
	if tag == "" {
		return fmt.Errorf("%w: empty", ErrInvalidTag)
	}
	if len(tag) > MaxTagLen {
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrInvalidTag, len(tag), MaxTagLen)
	}
	for i := 0; i < len(tag); i++ {
		if !IsTagByte(tag[i]) {
			return fmt.Errorf("%w: %q has byte %#02x at offset %d; allowed: A-Z a-z 0-9 . _ : -", ErrInvalidTag, truncate(tag, 40), tag[i], i)
		}
	}
	return nil
}

// IsTagByte reports whether c may appear in a tag name.
func IsTagByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ValidateCount checks a batch size: 1..MaxBatch.
func ValidateCount(n int) error {
	if n < 1 || n > MaxBatch {
		return fmt.Errorf("%w: %d, want 1..%d", ErrInvalidCount, n, MaxBatch)
	}
	return nil
}

// ValidateID checks an issued ID: IDs are positive. Transports call it on a
// generator's answer and clients on a server's, so that a bug becomes an
// error, never a sentinel ID (Leaf's -2 and 0) handed out as an ID.
func ValidateID(id int64) error {
	if id < 1 {
		return fmt.Errorf("ID %d is not positive", id)
	}
	return nil
}

// ValidateIDs checks an issued batch as ValidateID does an ID: exactly n IDs,
// positive and strictly increasing.
func ValidateIDs(ids []int64, n int) error {
	if len(ids) != n {
		return fmt.Errorf("%d IDs, want %d", len(ids), n)
	}
	prev := int64(0)
	for i, id := range ids {
		if id <= prev {
			return fmt.Errorf("ID %d after %d at index %d", id, prev, i)
		}
		prev = id
	}
	return nil
}

// MaxRange is the most IDs one range lease may ask for: a range is two
// numbers whatever its length, so it is bounded by the largest step, not by
// MaxBatch. A lease is never longer than what is left of the segment the
// server hands it from.
const MaxRange = MaxStep

// ValidateRangeCount checks the length asked of a range lease: 1..MaxRange.
func ValidateRangeCount(n int) error {
	if n < 1 || n > MaxRange {
		return fmt.Errorf("%w: %d, want 1..%d", ErrInvalidCount, n, MaxRange)
	}
	return nil
}

// ParseRangeCount parses a decimal range length and validates it.
func ParseRangeCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a whole number", ErrInvalidCount, truncate(s, 40))
	}
	return n, ValidateRangeCount(n)
}

// ParseCount parses a decimal batch size and validates it.
func ParseCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a whole number", ErrInvalidCount, truncate(s, 40))
	}
	return n, ValidateCount(n)
}

// CheckID is the old name of ValidateID.
//
// Deprecated: use ValidateID; CheckID goes in the release after the next.
func CheckID(id int64) error { return ValidateID(id) }

// CheckIDs is the old name of ValidateIDs.
//
// Deprecated: use ValidateIDs; CheckIDs goes in the release after the next.
func CheckIDs(ids []int64, n int) error { return ValidateIDs(ids, n) }
