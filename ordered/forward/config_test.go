package forward_test

import (
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/testutil"
	"github.com/leafgo/leaf/ordered/forward"
)

// TestConfigValidate: what Validate refuses New refuses too, with
// ErrInvalidArgument; a zero field takes DefaultConfig's value.
func TestConfigValidate(t *testing.T) {
	local := &localGen{}
	for _, tc := range []struct {
		name string
		c    forward.Config
		ok   bool
	}{
		{"defaults", forward.Config{Local: local}, true},
		{"everything set", forward.Config{Local: local, Self: "http://10.0.0.1:8080#n1", Token: "0123456789abcdef-_.~+/=", Wait: time.Second, MaxQueue: 1}, true},
		{"no local", forward.Config{}, false},
		{"negative wait", forward.Config{Local: local, Wait: -time.Second}, false},
		{"negative queue", forward.Config{Local: local, MaxQueue: -1}, false},
		{"token with a newline", forward.Config{Local: local, Token: "secret\r\nX-Evil: 1"}, false},
		{"token with a space", forward.Config{Local: local, Token: "secret token"}, false},
		{"token outside ASCII", forward.Config{Local: local, Token: "sécret"}, false},
		{"self with a space", forward.Config{Local: local, Self: "http://a b#n"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
			f, nerr := forward.New(tc.c)
			if tc.ok {
				if nerr != nil {
					t.Fatalf("New: %v", nerr)
				}
				f.Close()
				return
			}
			testutil.ErrIs(t, err, leaf.ErrInvalidArgument)
			testutil.ErrIs(t, nerr, leaf.ErrInvalidArgument)
		})
	}
	if d := forward.DefaultConfig(); d.Wait != forward.DefaultWait || d.MaxQueue != forward.DefaultMaxQueue || d.Logger == nil {
		t.Errorf("DefaultConfig: %+v", d)
	}
}
