package reqlog

import (
	"regexp"
	"testing"
	"testing/synctest"
	"time"
)

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for range 10000 {
		id := NewID()
		if !hex16.MatchString(id) || seen[id] {
			t.Fatalf("NewID() = %q: want 16 new hex digits", id)
		}
		seen[id] = true
	}
}

// TestBudget: Lines lines per window, the rest dropped and reported by the
// next line let through.
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &Budget{Lines: 3, Window: 10 * time.Second}
		allowed := 0
		for range 10 {
			if ok, dropped := b.Allow(); ok {
				allowed++
				if dropped != 0 {
					t.Errorf("a line in the first window reports %d dropped", dropped)
				}
			}
		}
		if allowed != 3 {
			t.Errorf("%d lines let through in a window, want 3", allowed)
		}
		time.Sleep(9 * time.Second)
		if ok, _ := b.Allow(); ok {
			t.Error("a line let through before the window ended")
		}
		time.Sleep(time.Second)
		if ok, dropped := b.Allow(); !ok || dropped != 8 {
			t.Errorf("first line of the next window: %v, %d dropped; want true, 8", ok, dropped)
		}
		if ok, dropped := b.Allow(); !ok || dropped != 0 {
			t.Errorf("second line of the next window: %v, %d dropped; want true, 0", ok, dropped)
		}
	})
}

func TestBudgetZeroValueAllowsAll(t *testing.T) {
	var b Budget
	for range 1000 {
		if ok, _ := b.Allow(); !ok {
			t.Fatal("the zero Budget dropped a line")
		}
	}
}
