package leaf_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/leafgo/leaf"
)

func TestValidateTag(t *testing.T) {
	for _, tc := range []struct {
		tag string
		ok  bool
	}{
		{"leaf-segment-test", true},
		{"A.b_c:d-9", true},
		{strings.Repeat("x", 128), true},
		{"", false},
		{strings.Repeat("x", 129), false},
		{"a b", false},
		{"a/b", false},
		{"a%2Fb", false},
		{"tag'; DROP TABLE leaf_alloc; --", false},
		{"ünicode", false},
		{"tab\t", false},
		{"nul\x00", false},
	} {
		err := leaf.ValidateTag(tc.tag)
		if tc.ok != (err == nil) {
			t.Errorf("ValidateTag(%q) = %v, want ok=%v", tc.tag, err, tc.ok)
		}
		if err != nil && !errors.Is(err, leaf.ErrInvalidTag) {
			t.Errorf("ValidateTag(%q) = %v, not ErrInvalidTag", tc.tag, err)
		}
	}
}

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"1", 1, true},
		{"10000", 10000, true},
		{"0", 0, false},
		{"10001", 0, false},
		{"-1", 0, false},
		{"", 0, false},
		{"abc", 0, false},
		{"1e3", 0, false},
		{"99999999999999999999", 0, false},
	} {
		n, err := leaf.ParseCount(tc.in)
		if tc.ok != (err == nil) || (tc.ok && n != tc.want) {
			t.Errorf("ParseCount(%q) = %d, %v; want %d ok=%v", tc.in, n, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, leaf.ErrInvalidCount) {
			t.Errorf("ParseCount(%q) = %v, not ErrInvalidCount", tc.in, err)
		}
	}
}

func TestValidateAlloc(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    leaf.Alloc
		want error
	}{
		{"ok", leaf.Alloc{Tag: "t", MaxID: 1, Step: 1000}, nil},
		{"bad tag", leaf.Alloc{Tag: "t t", MaxID: 1, Step: 1000}, leaf.ErrInvalidTag},
		{"zero step", leaf.Alloc{Tag: "t", MaxID: 1}, leaf.ErrInvalidArgument},
		{"step too big", leaf.Alloc{Tag: "t", MaxID: 1, Step: leaf.MaxStep + 1}, leaf.ErrInvalidArgument},
		{"no start", leaf.Alloc{Tag: "t", MaxID: 0, Step: 10}, nil},
		{"negative start", leaf.Alloc{Tag: "t", MaxID: -1, Step: 10}, leaf.ErrInvalidArgument},
		{"long description", leaf.Alloc{Tag: "t", MaxID: 1, Step: 10, Description: strings.Repeat("d", 257)}, leaf.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := leaf.ValidateAlloc(tc.a)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("ValidateAlloc = %v, want %v", err, tc.want)
			}
		})
	}
	if r := (leaf.Reservation{MaxID: 2001, Step: 2000}); r.Start() != 1 {
		t.Fatalf("Start() = %d, want 1", r.Start())
	}
}

func TestTombstoneError(t *testing.T) {
	err := fmt.Errorf("sqlite: create %q: %w", "orders", &leaf.TombstoneError{Tag: "orders", MinStart: 31})
	if !errors.Is(err, leaf.ErrTagTombstoned) {
		t.Errorf("%v does not match ErrTagTombstoned", err)
	}
	var te *leaf.TombstoneError
	if !errors.As(err, &te) || te.MinStart != 31 {
		t.Errorf("errors.As(%v) = %+v", err, te)
	}
	want := "tag orders was deleted; IDs below 31 may have been issued under it; create it with start >= 31 or without a start"
	if !strings.HasSuffix(err.Error(), want) {
		t.Errorf("message %q, want it to end with %q", err, want)
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, c := range []struct {
		in   string
		want leaf.Endpoint
		ok   bool
	}{
		{"10.0.0.1:8080", leaf.Endpoint{"10.0.0.1", 8080}, true},
		{"[::1]:80", leaf.Endpoint{"::1", 80}, true},
		{"10.0.0.1", leaf.Endpoint{}, false},
		{"10.0.0.1:0", leaf.Endpoint{}, false},
		{"10.0.0.1:65536", leaf.Endpoint{}, false},
		{"host:80", leaf.Endpoint{}, false},
		{":80", leaf.Endpoint{"", 80}, true}, // Java Leaf's node on a host without IPv4
		{"10.0.0.1:x", leaf.Endpoint{}, false},
	} {
		got, err := leaf.ParseEndpoint(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseEndpoint(%q) = %+v, %v", c.in, got, err)
		}
		if err != nil && !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("ParseEndpoint(%q) error %v does not wrap ErrInvalidArgument", c.in, err)
		}
		if c.ok && got.String() != strings.Trim(c.in, "[]") && c.in[0] != '[' {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), c.in)
		}
	}
	if err := leaf.ValidateRegistration(leaf.Endpoint{"10.0.0.1", 80}, -1); !errors.Is(err, leaf.ErrInvalidArgument) {
		t.Errorf("negative maxID: %v", err)
	}
}

func TestValidateClusterName(t *testing.T) {
	for name, ok := range map[string]bool{
		"leaf": true, "com.sankuai.leaf.opensource.test": true, "a-b_c.1": true, strings.Repeat("n", 128): true,
		"": false, ".": false, "..": false, "a/b": false, "a:b": false, "a b": false, strings.Repeat("n", 129): false,
	} {
		err := leaf.ValidateClusterName(name)
		if (err == nil) != ok || (err != nil && !errors.Is(err, leaf.ErrInvalidArgument)) {
			t.Errorf("ValidateClusterName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestValidateIDs(t *testing.T) {
	tests := []struct {
		ids  []int64
		n    int
		want string // "" for valid
	}{
		{[]int64{1, 2, 3}, 3, ""},
		{[]int64{5}, 1, ""},
		{[]int64{1, 2}, 3, "2 IDs, want 3"},
		{[]int64{0, 1}, 2, "ID 0 after 0 at index 0"},
		{[]int64{3, 3}, 2, "ID 3 after 3 at index 1"},
		{[]int64{4, 2}, 2, "ID 2 after 4 at index 1"},
		{[]int64{-1}, 1, "ID -1 after 0 at index 0"},
	}
	for _, tt := range tests {
		err := leaf.ValidateIDs(tt.ids, tt.n)
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
			t.Errorf("ValidateIDs(%v, %d) = %v, want %q", tt.ids, tt.n, err, tt.want)
		}
	}
	for id, ok := range map[int64]bool{1: true, 1 << 62: true, 0: false, -2: false} {
		if err := leaf.ValidateID(id); (err == nil) != ok {
			t.Errorf("ValidateID(%d) = %v", id, err)
		}
	}
}

func TestIDRangeCheck(t *testing.T) {
	for _, tc := range []struct {
		r  leaf.IDRange
		n  int
		ok bool
	}{
		{leaf.IDRange{Start: 1, End: 2}, 1, true},
		{leaf.IDRange{Start: 10, End: 15}, 5, true},
		{leaf.IDRange{Start: 10, End: 12, Period: "20261128"}, 5, true}, // shorter than n
		{leaf.IDRange{Start: 0, End: 3}, 5, false},                      // not above 0
		{leaf.IDRange{Start: 5, End: 5}, 5, false},                      // empty
		{leaf.IDRange{Start: 5, End: 4}, 5, false},                      // backwards
		{leaf.IDRange{Start: 1, End: 7}, 5, false},                      // longer than n
	} {
		if err := tc.r.Check(tc.n); (err == nil) != tc.ok {
			t.Errorf("%+v.Check(%d) = %v, want ok=%v", tc.r, tc.n, err, tc.ok)
		}
	}
}
