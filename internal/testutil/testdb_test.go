package testutil

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestWithSearchPath(t *testing.T) {
	cases := []struct{ dsn, db string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres"},
		{"postgresql://u:p@h/db", "db"},
		{"host=127.0.0.1 user=postgres dbname=x sslmode=disable", "x"},
		{"host=127.0.0.1 user=postgres search_path=public", ""},
	}
	for _, c := range cases {
		got := withSearchPath(c.dsn, "leaftest_x")
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("withSearchPath(%q) = %q: %v", c.dsn, got, err)
			continue
		}
		if sp := cfg.RuntimeParams["search_path"]; sp != "leaftest_x" {
			t.Errorf("withSearchPath(%q): search_path %q", c.dsn, sp)
		}
		if c.db != "" && cfg.Database != c.db {
			t.Errorf("withSearchPath(%q): database %q, want %q", c.dsn, cfg.Database, c.db)
		}
	}
}

func TestUniqueName(t *testing.T) {
	a, b := uniqueName(), uniqueName()
	if a == b || len(a) != len("leaftest_")+12 {
		t.Errorf("uniqueName() = %q, %q", a, b)
	}
}
