package sqlstore

import (
	"errors"
	"testing"
	"time"

	"github.com/leafgo/leaf"
)

// TestConfigDefaults: a zero Config takes DefaultConfig's values in New,
// and a set field is kept.
func TestConfigDefaults(t *testing.T) {
	d := DefaultConfig()
	s := New(nil, Dialect{}, Config{})
	if s.attempts != d.MaxAttempts || s.backoff != d.RetryBackoff || s.now == nil {
		t.Errorf("zero Config became attempts %d, backoff %s, now %p; want DefaultConfig's %+v", s.attempts, s.backoff, s.now, d)
	}
	s = New(nil, Dialect{}, Config{MaxAttempts: 2, RetryBackoff: time.Second})
	if s.attempts != 2 || s.backoff != time.Second {
		t.Errorf("set fields became attempts %d, backoff %s", s.attempts, s.backoff)
	}
}

func TestFailoverConfigValidate(t *testing.T) {
	ok := DefaultFailoverConfig()
	ok.Identity = "@@server_uuid"
	if err := ok.Validate(); err != nil {
		t.Errorf("DefaultFailoverConfig with an Identity: %v", err)
	}
	for name, c := range map[string]FailoverConfig{
		"no identity":     DefaultFailoverConfig(),
		"negative margin": {Identity: "@@server_uuid", MarginSteps: -1},
	} {
		if err := c.Validate(); !errors.Is(err, leaf.ErrInvalidArgument) {
			t.Errorf("%s: Validate = %v, want ErrInvalidArgument", name, err)
		}
	}
}
