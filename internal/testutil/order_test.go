package testutil

import (
	"strings"
	"testing"
)

func TestOrderViolations(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answers []Answer
		want    string // a violation's words; "" for none
	}{
		{"sequential", []Answer{{1, 2, []int64{1}}, {3, 4, []int64{2, 3}}, {5, 6, []int64{7}}}, ""},
		{"concurrent either way", []Answer{{1, 4, []int64{9}}, {2, 3, []int64{5}}, {5, 6, []int64{10}}}, ""},
		{"started after an answer, got less", []Answer{{1, 2, []int64{9}}, {3, 4, []int64{5}}}, "not above 9"},
		{"below an earlier answer's largest", []Answer{{1, 2, []int64{3, 9}}, {3, 4, []int64{5, 10}}}, "not above 9"},
		{"duplicate among concurrent", []Answer{{1, 4, []int64{5}}, {2, 3, []int64{5}}}, "duplicate ID 5"},
		{"answer not increasing", []Answer{{1, 2, []int64{5, 4}}}, "do not increase"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := OrderViolations(tt.answers)
			switch {
			case tt.want == "" && len(v) > 0:
				t.Errorf("violations %q, want none", v)
			case tt.want != "" && (len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), tt.want)):
				t.Errorf("violations %q, want one saying %q", v, tt.want)
			}
		})
	}
}
