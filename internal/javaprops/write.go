package javaprops

import "unicode/utf16"

// AppendEntry appends "key=value" and a newline to dst, both escaped as
// Properties.store(OutputStream) escapes them, and returns the result.
// Parse, and Java, read key and value back unchanged.
func AppendEntry(dst []byte, key, value string) []byte {
	dst = appendEscaped(dst, key, true)
	dst = append(dst, '=')
	dst = appendEscaped(dst, value, false)
	return append(dst, '\n')
}

// EscapeKey writes s as a properties key: every blank and separator is
// escaped, so none ends the key early.
func EscapeKey(s string) string { return string(appendEscaped(nil, s, true)) }

// EscapeValue writes s as a properties value. Only a leading space needs
// escaping: the reader skips blanks before the value but keeps the rest.
func EscapeValue(s string) string { return string(appendEscaped(nil, s, false)) }

const hexDigits = "0123456789ABCDEF"

// appendEscaped is Java's Properties.saveConvert with escapeUnicode set, as
// store(OutputStream) calls it: the output is printable ASCII, and every
// other UTF-16 unit (a surrogate pair gives two) is written \uXXXX.
func appendEscaped(dst []byte, s string, key bool) []byte {
	for i, u := range utf16.Encode([]rune(s)) {
		switch u {
		case '\\':
			dst = append(dst, '\\', '\\')
		case ' ':
			if i == 0 || key {
				dst = append(dst, '\\')
			}
			dst = append(dst, ' ')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '=', ':', '#', '!':
			dst = append(dst, '\\', byte(u))
		default:
			if u < 0x20 || u > 0x7e {
				dst = append(dst, '\\', 'u', hexDigits[u>>12], hexDigits[u>>8&0xf], hexDigits[u>>4&0xf], hexDigits[u&0xf])
			} else {
				dst = append(dst, byte(u))
			}
		}
	}
	return dst
}
