package config

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

const (
	dsnA = "leaf:pw@tcp(db-a:3306)/leaf"
	dsnB = "leaf:pw@tcp(db-b:3306)/leaf?timeout=2s,5s" // a comma: not a separator
	dsnC = "leaf:pw@tcp(db-c:3306)/leaf"
)

// TestDSNList: segment.dsn is one DSN or a list, from every source, in the
// order given, and a later source replaces the whole list.
func TestDSNList(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		env   []string
		flags []string
		want  []string
	}{
		{name: "unset", want: nil},
		{name: "one in the file", file: "segment:\n  store: mysql\n  dsn: " + dsnA + "\n", want: []string{dsnA}},
		{name: "a sequence in the file", file: "segment:\n  store: mysql\n  dsn:\n    - " + dsnA + "\n    - '" + dsnB + "'\n    - " + dsnC + "\n",
			want: []string{dsnA, dsnB, dsnC}},
		{name: "a flow sequence", file: "segment:\n  store: mysql\n  dsn: ['" + dsnA + "', '" + dsnB + "']\n", want: []string{dsnA, dsnB}},
		{name: "one line per DSN in the variable", env: []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + dsnA + "\n" + dsnB + "\n"},
			want: []string{dsnA, dsnB}},
		{name: "blank lines and spaces are no database", env: []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=\n  " + dsnA + "  \n\n" + dsnB},
			want: []string{dsnA, dsnB}},
		{name: "the flag repeated", flags: []string{"--segment-store", "mysql", "--segment-dsn", dsnA, "--segment-dsn", dsnB, "--segment-dsn", dsnC},
			want: []string{dsnA, dsnB, dsnC}},
		{name: "the variable replaces the file's list", file: "segment:\n  store: mysql\n  dsn: ['" + dsnA + "', '" + dsnB + "']\n",
			env: []string{"LEAF_SEGMENT_DSN=" + dsnC}, want: []string{dsnC}},
		{name: "flags replace the variable's list", env: []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + dsnA + "\n" + dsnB},
			flags: []string{"--segment-dsn", dsnC, "--segment-dsn", dsnA}, want: []string{dsnC, dsnA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			b := BindFlags(fs, "segment.store", "segment.dsn")
			if err := fs.Parse(tt.flags); err != nil {
				t.Fatal(err)
			}
			src := b.Sources(tt.env)
			if tt.file != "" {
				src.File = writeFile(t, tt.file)
			}
			c, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Segment.DSNs(); !slices.Equal(got, tt.want) {
				t.Errorf("DSNs = %q, want %q", got, tt.want)
			}
			if got, want := c.Segment.MultiDatabase(), len(tt.want) > 1; got != want {
				t.Errorf("MultiDatabase = %v, want %v", got, want)
			}
			if len(tt.want) > 0 && c.Segment.DSN != JoinDSNs(tt.want) {
				t.Errorf("DSN = %q, want the list joined by newlines", c.Segment.DSN)
			}
		})
	}
}

func TestDSNListInvalid(t *testing.T) {
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("leaf@tcp(db-%d:3306)/leaf", i)
	}
	tests := []struct {
		name string
		file string
		env  []string
		want []string
	}{
		{"the same database twice", "", []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + dsnA + "\n" + dsnB + "\n" + dsnA},
			[]string{"segment.dsn (from LEAF_SEGMENT_DSN): database 2 (leaf:xxxxx@tcp(db-a:3306)/leaf) is database 0 again"}},
		{"more than leaf.MaxStripes", "", []string{"LEAF_SEGMENT_STORE=postgres", "LEAF_SEGMENT_DSN=" + strings.Join(many, "\n")},
			[]string{"segment.dsn (from LEAF_SEGMENT_DSN): lists 65 databases, want at most 64"}},
		{"several SQLite files", "", []string{"LEAF_SEGMENT_DSN=a.db\nb.db"},
			[]string{"segment.dsn (from LEAF_SEGMENT_DSN): lists 2 databases, but segment.store sqlite is one file"}},
		{"an empty sequence", "segment:\n  dsn: []\n", nil, []string{"leaf.yml:2: segment.dsn: the list is empty"}},
		{"an empty entry", "segment:\n  store: mysql\n  dsn:\n    - " + dsnA + "\n    - ''\n", nil,
			[]string{"segment.dsn: entry 1 (line 5) must be one non-empty line"}},
		{"a null entry", "segment:\n  store: mysql\n  dsn:\n    - " + dsnA + "\n    -\n", nil,
			[]string{"segment.dsn: entry 1 (line 5) must be a single value"}},
		{"a nested list", "segment:\n  store: mysql\n  dsn:\n    - [" + dsnA + "]\n", nil,
			[]string{"segment.dsn: entry 0 (line 4) must be a single value, got a list"}},
		{"a mapping", "segment:\n  dsn: {a: b}\n", nil, []string{"segment.dsn wants a value or a list of values, got a mapping"}},
		{"a list for a key that takes one value", "segment:\n  store: [mysql]\n", nil, []string{"segment.store wants a single value, got a list"}},
		{"the registry cannot guess which database", "", []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + dsnA + "\n" + dsnB,
			"LEAF_SNOWFLAKE_REGISTRY=mysql"}, []string{"snowflake.registry (from LEAF_SNOWFLAKE_REGISTRY): mysql needs snowflake.dsn when segment.dsn lists several databases"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := Sources{Env: tt.env}
			if tt.file != "" {
				src.File = writeFile(t, tt.file)
			}
			loadFails(t, src, tt.want...)
		})
	}
	// With snowflake.dsn set the registry is named, and the list is fine.
	c, err := Load(Sources{Env: []string{"LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN=" + dsnA + "\n" + dsnB,
		"LEAF_SNOWFLAKE_REGISTRY=mysql", "LEAF_SNOWFLAKE_DSN=" + dsnC}})
	if err != nil {
		t.Fatal(err)
	}
	if c.MySQLRegistryDSN() != dsnC {
		t.Errorf("MySQLRegistryDSN = %q, want snowflake.dsn", c.MySQLRegistryDSN())
	}
}

func TestDSNListKey(t *testing.T) {
	for _, k := range Keys() {
		if k.Path == "segment.dsn" && k.Type != "string (list)" {
			t.Errorf("segment.dsn type %q, want string (list)", k.Type)
		}
	}
}
