package javaprops

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	type kv = [3]string // key, value, line
	tests := []struct {
		name string
		in   string
		want []kv
	}{
		{"separators", "a=1\nb:2\nc 3\nd\t=\t4\ne :5\nf = = 6\ng==7\nh:=8\n", []kv{
			{"a", "1", "1"}, {"b", "2", "2"}, {"c", "3", "3"}, {"d", "4", "4"}, {"e", "5", "5"}, {"f", "= 6", "6"}, {"g", "=7", "7"}, {"h", "=8", "8"}}},
		{"key only and empty values", "alone\nempty=\nspaces =   \n", []kv{{"alone", "", "1"}, {"empty", "", "2"}, {"spaces", "", "3"}}},
		{"leading blanks trimmed, trailing kept", "  \t\fkey = value  \n", []kv{{"key", "value  ", "1"}}},
		{"comments and blank lines", "# hash\n! bang\n   # indented\n\n  \t\nk=v # not a comment\n", []kv{{"k", "v # not a comment", "6"}}},
		{"comment line ending in a backslash does not continue", "# comment \\\nk=v\n", []kv{{"k", "v", "2"}}},
		{"continuation", "k = one, \\\n      two, \\\n\tthree\nnext=x\n", []kv{{"k", "one, two, three", "1"}, {"next", "x", "4"}}},
		{"continued line may start with #", "k=a\\\n#b\n", []kv{{"k", "a#b", "1"}}},
		{"blank continuation ends the entry", "k=a\\\n\nj=b\n", []kv{{"k", "a", "1"}, {"j", "b", "3"}}},
		{"even backslashes do not continue", "k=a\\\\\nj=b\n", []kv{{"k", `a\`, "1"}, {"j", "b", "2"}}},
		{"backslash at end of file", "k=a\\", []kv{{"k", "a", "1"}}},
		{"CRLF and CR", "a=1\r\nb=2\rc=3", []kv{{"a", "1", "1"}, {"b", "2", "2"}, {"c", "3", "3"}}},
		{"CRLF continuation", "a=1\\\r\n  2\r\n", []kv{{"a", "12", "1"}}},
		{"escapes", `k=\t\n\r\f\\\=\:\#\!\ x\q` + "\n", []kv{{"k", "\t\n\r\f\\=:#! xq", "1"}}},
		{"escaped separators in the key", `a\=b\:c\ d=v` + "\n", []kv{{"a=b:c d", "v", "1"}}},
		{"unicode escapes", `name=\u4e2d\u6587 \u00E9` + "\n", []kv{{"name", "中文 é", "1"}}},
		{"surrogate pair", `e=\uD83D\uDE00` + "\n", []kv{{"e", "😀", "1"}}},
		{"bytes are ISO 8859-1", "k=caf\xe9\n", []kv{{"k", "café", "1"}}},
		{"duplicates kept in order", "k=1\nk=2\n", []kv{{"k", "1", "1"}, {"k", "2", "2"}}},
		{"jdbc url", "leaf.jdbc.url=jdbc:mysql://h:3306/leaf?a=1&b=2\n", []kv{{"leaf.jdbc.url", "jdbc:mysql://h:3306/leaf?a=1&b=2", "1"}}},
		{"empty file", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			props, err := Parse("x.properties", []byte(tt.in))
			if err != nil {
				t.Fatalf("ParseProperties: %v", err)
			}
			var got []kv
			for _, p := range props {
				got = append(got, kv{p.Key, p.Value, strconv.Itoa(p.Line)})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{"a=1\nk=\\u12\n", "a=1\nk=\\u12G4\n", "a=1\n\\uZZZZ=1\n", "a=1\nk=x\\\n \\u1"} {
		_, err := Parse("x.properties", []byte(in))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Line != 2 || !strings.HasPrefix(err.Error(), "x.properties:2: malformed \\uxxxx escape") {
			t.Errorf("Parse(%q) = %v, want a malformed-escape error at x.properties:2", in, err)
		}
	}
}

func TestLookup(t *testing.T) {
	props, err := Parse("x", []byte("a=1\nb=2\na=3\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		key, value string
		line       int
		ok         bool
	}{{"a", "3", 3, true}, {"b", "2", 2, true}, {"c", "", 0, false}} {
		p, ok := Lookup(props, tt.key)
		if ok != tt.ok || p.Value != tt.value || p.Line != tt.line {
			t.Errorf("Lookup(%q) = %+v, %v; want %q on line %d, %v", tt.key, p, ok, tt.value, tt.line, tt.ok)
		}
	}
}

// TestWrite: keys and values are escaped as Java's Properties.store writes
// them, and read back unchanged.
func TestWrite(t *testing.T) {
	tests := []struct {
		key, value string
		want       string // the line AppendEntry writes
	}{
		{"workerID", "5", "workerID=5\n"},
		{"", "", "=\n"},
		{"a b", " x y ", `a\ b=\ x y ` + "\n"},
		{"k", "p@ss:w/rd#1!=", `k=p@ss\:w/rd\#1\!\=` + "\n"},
		{`back\slash`, `C:\dir`, `back\\slash=C\:\\dir` + "\n"},
		{"k", "\t\n\r\f", `k=\t\n\r\f` + "\n"},
		{"k", "\x00\x1f\x7f", `k=\u0000\u001F\u007F` + "\n"},
		{"name", "中文 é", `name=\u4E2D\u6587 \u00E9` + "\n"},
		{"e", "😀", `e=\uD83D\uDE00` + "\n"},
		{"#key", "!v", `\#key=\!v` + "\n"},
	}
	for _, tt := range tests {
		got := string(AppendEntry(nil, tt.key, tt.value))
		if got != tt.want {
			t.Errorf("AppendEntry(%q, %q) = %q, want %q", tt.key, tt.value, got, tt.want)
			continue
		}
		if k, v := EscapeKey(tt.key), EscapeValue(tt.value); k+"="+v+"\n" != got {
			t.Errorf("EscapeKey(%q) = %q, EscapeValue(%q) = %q: not the line %q", tt.key, k, tt.value, v, got)
		}
		props, err := Parse("x", []byte(got))
		if err != nil || len(props) != 1 || props[0].Key != tt.key || props[0].Value != tt.value {
			t.Errorf("%q reads back as %+v, %v", got, props, err)
		}
	}
	// Appending extends what is there.
	if got := string(AppendEntry([]byte("a=1\n"), "b", "2")); got != "a=1\nb=2\n" {
		t.Errorf("AppendEntry onto a line = %q", got)
	}
}

// FuzzParse: Parse never panics, numbers entries by increasing line within
// the file, and what it reads, written out with AppendEntry, reads back the
// same, one entry per line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "a=1\nb:2\nc 3\n", "k = one, \\\n      two, \\\n\tthree\nnext=x\n", "a=1\r\nb=2\rc=3",
		"e=\\uD83D\\uDE00\nk=caf\xe9\n", "# c \\\nk=v\\", "k=\\u12", "\\ lead=\\ x\\\\\n",
		"workerID=5\nmaxTimestamp=1590000000000\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		props, err := Parse("in", data)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line < 1 || se.Line > len(naturalLines(data)) {
				t.Fatalf("%q: error %v is not a SyntaxError on a line of the file", data, err)
			}
			return
		}
		lines := len(naturalLines(data))
		var out []byte
		for i, p := range props {
			if p.Line < 1 || p.Line > lines || i > 0 && p.Line <= props[i-1].Line {
				t.Fatalf("%q: entry %d (%q) is on line %d, after line %d, in a file of %d lines", data, i, p.Key, p.Line, props[max(i-1, 0)].Line, lines)
			}
			out = AppendEntry(out, p.Key, p.Value)
		}
		again, err := Parse("again", out)
		if err != nil || len(again) != len(props) {
			t.Fatalf("%q read as %+v, written as %q, reads back as %+v, %v", data, props, out, again, err)
		}
		for i := range props {
			if again[i].Key != props[i].Key || again[i].Value != props[i].Value || again[i].Line != i+1 {
				t.Fatalf("%q read as %+v, written as %q, reads back as %+v", data, props, out, again)
			}
		}
	})
}
