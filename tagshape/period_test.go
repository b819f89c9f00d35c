package tagshape_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

func TestPeriodKey(t *testing.T) {
	sh, err := tagshape.Location("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-11-23 16:30 UTC is 2026-11-24 00:30 in Shanghai.
	at := time.Date(2026, 11, 23, 16, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		p    leaf.Period
		t    time.Time
		n    int
		want string
	}{
		{leaf.PeriodDay, at, 0, "20261123"},
		{leaf.PeriodDay, at.In(sh), 0, "20261124"},
		{leaf.PeriodMonth, at, 0, "202611"},
		{leaf.PeriodYear, at, 0, "2026"},
		{leaf.PeriodNone, at, 0, ""},
		{leaf.PeriodDay, at, 1, "20261122"},
		{leaf.PeriodDay, at, 23, "20261031"},
		{leaf.PeriodDay, time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), 1, "20240229"},
		{leaf.PeriodMonth, at, 11, "202512"},
		{leaf.PeriodMonth, time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC), 1, "202602"},
		{leaf.PeriodYear, at, 2, "2024"},
		{leaf.PeriodYear, at, 5000, "0001"},
		{leaf.PeriodYear, time.Date(12026, 1, 1, 0, 0, 0, 0, time.UTC), 0, "9999"},
	} {
		got := tagshape.PeriodKeyBefore(tc.p, tc.t, tc.n)
		if got != tc.want {
			t.Errorf("PeriodKeyBefore(%s, %v, %d) = %q, want %q", tc.p, tc.t, tc.n, got, tc.want)
		}
		if tc.n == 0 && tagshape.PeriodKey(tc.p, tc.t) != got {
			t.Errorf("PeriodKey(%s, %v) = %q, want %q", tc.p, tc.t, tagshape.PeriodKey(tc.p, tc.t), got)
		}
		if tc.want != "" {
			if err := tagshape.ValidatePeriodKey(got); err != nil {
				t.Errorf("ValidatePeriodKey(%q): %v", got, err)
			}
			if len(got) != tagshape.PeriodKeyLen(tc.p) {
				t.Errorf("key %q for %s, want %d bytes", got, tc.p, tagshape.PeriodKeyLen(tc.p))
			}
		}
	}
}

func TestValidatePeriodKey(t *testing.T) {
	for _, key := range []string{"", "2026112", "202611240", "2026-11", "0000", "202613", "202600", "20260230", "20261100", "abcd"} {
		if err := tagshape.ValidatePeriodKey(key); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("ValidatePeriodKey(%q) = %v, want ErrInvalidArgument", key, err)
		}
	}
	for _, key := range []string{"2026", "202602", "20240229", "99991231"} {
		if err := tagshape.ValidatePeriodKey(key); err != nil {
			t.Errorf("ValidatePeriodKey(%q): %v", key, err)
		}
	}
}

func TestValidateTag(t *testing.T) {
	daily := leaf.TagShape{Period: leaf.PeriodDay}
	long := strings.Repeat("a", leaf.MaxPeriodicTagLen+1)
	if err := tagshape.ValidateTag(long, leaf.TagShape{}); err != nil {
		t.Errorf("plain tag of %d bytes: %v", len(long), err)
	}
	err := tagshape.ValidateTag(long, daily)
	if !errors.Is(err, leaf.ErrInvalidTag) || !strings.Contains(err.Error(), "at most 119") {
		t.Errorf("periodic tag of %d bytes: %v, want ErrInvalidTag naming the limit", len(long), err)
	}
	if err := tagshape.ValidateTag(long[1:], daily); err != nil {
		t.Errorf("periodic tag of %d bytes: %v", len(long)-1, err)
	}
	if got := tagshape.PeriodRow(long[1:], "20261124"); len(got) != leaf.MaxTagLen {
		t.Errorf("longest period row is %d bytes, want %d", len(got), leaf.MaxTagLen)
	}
	if err := leaf.ValidateTag(tagshape.PeriodRow("orders", "20261124")); err == nil {
		t.Error("ValidateTag accepts a period row's name")
	}
}
