package tagshape_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/tagshape"
)

func TestTagShapeValidate(t *testing.T) {
	for _, tc := range []struct {
		shape leaf.TagShape
		bad   string // part of the error, "" for a valid shape
	}{
		{leaf.TagShape{}, ""},
		{leaf.TagShape{Period: leaf.PeriodDay}, ""},
		{leaf.TagShape{Period: leaf.PeriodMonth, TimeZone: "Asia/Shanghai"}, ""},
		{leaf.TagShape{Period: leaf.PeriodYear, Format: leaf.IDFormat{Prefix: "INV-", Width: 8, Radix: 36}}, ""},
		{leaf.TagShape{OpaqueBits: 40, KeyCheck: "abc"}, ""},
		{leaf.TagShape{Format: leaf.IDFormat{Radix: 62}}, ""},
		{leaf.TagShape{Period: "week"}, "period"},
		{leaf.TagShape{TimeZone: "UTC"}, "periodic tags only"},
		{leaf.TagShape{Period: leaf.PeriodDay, TimeZone: "Mars/Olympus"}, "time zone"},
		{leaf.TagShape{Format: leaf.IDFormat{Prefix: "a b"}}, "prefix"},
		{leaf.TagShape{Format: leaf.IDFormat{Prefix: strings.Repeat("x", leaf.MaxFormatPrefix+1)}}, "prefix"},
		{leaf.TagShape{Format: leaf.IDFormat{Width: 20}}, "width"},
		{leaf.TagShape{Format: leaf.IDFormat{Width: -1}}, "width"},
		{leaf.TagShape{Format: leaf.IDFormat{Radix: 16}}, "radix"},
		{leaf.TagShape{OpaqueBits: 15}, "opaque bits"},
		{leaf.TagShape{OpaqueBits: 64}, "opaque bits"},
		{leaf.TagShape{KeyCheck: "abc"}, "key check"},
	} {
		err := tagshape.Validate(tc.shape)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%v: %v", tc.shape, err)
		case tc.bad != "" && (!errors.Is(err, leaf.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%+v: %v, want ErrInvalidArgument about %s", tc.shape, err, tc.bad)
		}
	}
}
