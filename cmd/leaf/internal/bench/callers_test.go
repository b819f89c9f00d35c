package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseIDLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want []int64
		err  string
	}{
		{"1", []int64{1}, ""},
		{"1263177670456266794", []int64{1263177670456266794}, ""},
		{"5\n6\n7", []int64{5, 6, 7}, ""},
		{"5\n6\n", []int64{5, 6}, ""},
		{"9223372036854775807", []int64{math.MaxInt64}, ""},
		{"9223372036854775808", nil, "not an ID"},
		{"", nil, "empty body"},
		{"\n", nil, "empty body"},
		{"0", nil, "line 1: not an ID"},
		{"-1", nil, "line 1: not an ID"},
		{"1\n\n2", nil, "line 2: not an ID"},
		{"1\n2x", nil, "line 2: not an ID"},
		{" 1", nil, "not an ID"},
		{"1\r\n2", nil, "line 1: not an ID"},
		{`{"id":1}`, nil, "not an ID"},
	}
	for _, tt := range tests {
		got, err := parseIDLines([]byte(tt.body), nil)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseIDLines(%q) error %v, want %q", tt.body, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseIDLines(%q) = %v, %v, want %v", tt.body, got, err, tt.want)
		}
	}
}

func TestCheckIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ids   []int64
		count int
		kind  string
	}{
		{[]int64{1}, 1, ""},
		{[]int64{1, 2, 9}, 3, ""},
		{[]int64{1, 2}, 3, "wrong count"},
		{nil, 1, "wrong count"},
		{[]int64{0}, 1, "bad ID"},
		{[]int64{-3}, 1, "bad ID"},
		{[]int64{2, 2}, 2, "not increasing"},
		{[]int64{3, 2}, 2, "not increasing"},
	}
	for _, tt := range tests {
		f := checkIDs(tt.ids, tt.count)
		if (f == nil) != (tt.kind == "") || (f != nil && f.kind != tt.kind) {
			t.Errorf("checkIDs(%v, %d) = %+v, want %q", tt.ids, tt.count, f, tt.kind)
		}
	}
}
