// Package javaprops reads and writes the java.util.Properties text format:
// Java Leaf's leaf.properties and the workerID.properties cache its
// snowflake holders keep. Reading follows Properties.load(InputStream) to
// the letter, so that a file means here what it means to Java; writing
// follows Properties.store(OutputStream), so that Java reads back what is
// written here.
package javaprops

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
)

// Property is one key=value entry of a properties file.
type Property struct {
	Key, Value string
	// Line is the line, counted from 1, on which the entry starts (an
	// entry continued with a backslash spans several).
	Line int
}

// SyntaxError is a malformed \uXXXX escape, the one thing
// Properties.load refuses.
type SyntaxError struct {
	Name string // the file, as given to Parse
	Line int    // where the entry holding the escape starts
	Msg  string
}

func (e *SyntaxError) Error() string { return e.Name + ":" + strconv.Itoa(e.Line) + ": " + e.Msg }

// Parse reads data as java.util.Properties.load(InputStream) does:
//
//   - bytes are ISO 8859-1 characters; anything else is written \uXXXX;
//   - lines end with \n, \r or \r\n; leading blanks (space, tab, form feed)
//     are skipped; a line whose first other character is # or ! is a
//     comment, and so is a blank line;
//   - a line ending in an odd number of backslashes continues on the next
//     one, whose leading blanks are skipped (a comment line never continues);
//   - the key ends at the first unescaped '=', ':' or blank; blanks, then at
//     most one '=' or ':', then blanks separate it from the value, which is
//     the rest of the line, trailing blanks included;
//   - in key and value, \t \n \r \f and \uXXXX are escapes, and a backslash
//     before any other character stands for that character.
//
// Entries come back in file order; a key given twice appears twice (Java
// keeps the last). name is only for messages: a malformed \u escape is a
// *SyntaxError, "name:line: ...".
func Parse(name string, data []byte) ([]Property, error) {
	var (
		out     []Property
		logical []uint16 // the entry being read, backslash-newlines removed
		start   int      // its first line; 0 between entries
	)
	finish := func() error {
		p, err := splitEntry(logical)
		if err != nil {
			return &SyntaxError{Name: name, Line: start, Msg: err.Error()}
		}
		p.Line = start
		out = append(out, p)
		start = 0
		return nil
	}
	for n, line := range naturalLines(data) {
		rest := trimBlanks(line)
		if start == 0 {
			if len(rest) == 0 || rest[0] == '#' || rest[0] == '!' {
				continue
			}
			start, logical = n+1, logical[:0]
		}
		// An odd number of backslashes ending the line escapes the break.
		slashes := len(rest) - len(bytes.TrimRight(rest, `\`))
		more := slashes%2 == 1
		if more {
			rest = rest[:len(rest)-1]
		}
		for _, b := range rest {
			logical = append(logical, uint16(b)) // ISO 8859-1: byte = code point
		}
		if !more {
			if err := finish(); err != nil {
				return nil, err
			}
		}
	}
	if start != 0 { // a backslash at the very end continues onto nothing
		if err := finish(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// naturalLines splits data at \n, \r and \r\n.
func naturalLines(data []byte) [][]byte {
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i])
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return lines
}

func isBlank(c uint16) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimBlanks(b []byte) []byte {
	for len(b) > 0 && isBlank(uint16(b[0])) {
		b = b[1:]
	}
	return b
}

// splitEntry splits one logical line into key and value, as Java's
// Properties.load0, and unescapes both.
func splitEntry(line []uint16) (Property, error) {
	keyLen, valueStart, hasSep, escaped := 0, len(line), false, false
	for ; keyLen < len(line); keyLen++ {
		c := line[keyLen]
		if (c == '=' || c == ':') && !escaped {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if isBlank(c) && !escaped {
			valueStart = keyLen + 1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for ; valueStart < len(line); valueStart++ {
		c := line[valueStart]
		if isBlank(c) {
			continue
		}
		if !hasSep && (c == '=' || c == ':') {
			hasSep = true
			continue
		}
		break
	}
	key, err := unescape(line[:keyLen])
	if err != nil {
		return Property{}, err
	}
	value, err := unescape(line[valueStart:])
	if err != nil {
		return Property{}, err
	}
	return Property{Key: key, Value: value}, nil
}

// unescape resolves the escapes of a key or value (Java's
// loadConvert). The text is UTF-16, as in Java, so that a surrogate pair
// written as two \u escapes decodes to one character.
func unescape(s []uint16) (string, error) {
	out := make([]uint16, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			out = append(out, c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'u':
			if i+4 >= len(s) {
				return "", fmt.Errorf(`malformed \uxxxx escape: %q`, string(utf16.Decode(s[i-1:])))
			}
			var r uint16
			for _, h := range s[i+1 : i+5] {
				d, ok := hexDigit(h)
				if !ok {
					return "", fmt.Errorf(`malformed \uxxxx escape: %q`, string(utf16.Decode(s[i-1:i+5])))
				}
				r = r<<4 | d
			}
			out = append(out, r)
			i += 4
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 'f':
			out = append(out, '\f')
		default:
			out = append(out, c)
		}
	}
	return string(utf16.Decode(out)), nil
}

func hexDigit(c uint16) (uint16, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Lookup returns the entry for key that Java's getProperty would: the last
// one given.
func Lookup(props []Property, key string) (Property, bool) {
	for i := len(props) - 1; i >= 0; i-- {
		if props[i].Key == key {
			return props[i], true
		}
	}
	return Property{}, false
}
