package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// escapeControl renders s for a terminal: every control character (C0 but
// tab and newline, DEL, C1) and every bidirectional override is written as
// a \uXXXX escape, so that a group name, key, reason, job or table name
// read from the database can neither move the cursor, recolour nor reorder
// what the operator reads. \uXXXX is also a valid escape inside a JSON
// string, so JSON output stays valid and means the same.
func escapeControl(s string) string { return escapeWhere(s, needsEscape) }

// escapeName renders a name (a group, a class) on one line: as
// escapeControl, and a newline or tab in it escaped too. The escapes are
// those of bash's $'...' quoting, so $'<what is shown>' types the name back
// (shellArg writes it so).
func escapeName(s string) string { return escapeWhere(s, isControl) }

func escapeWhere(s string, escape func(rune) bool) string {
	if strings.IndexFunc(s, escape) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case escape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e || r == 0x200f || r == 0x061c:
		return true
	}
	return false
}

// escapingWriter escapes control characters in everything written through
// it (see escapeControl). A carriage return is passed through only as the
// first byte of a write: that is how a progress bar redraws its line, and
// text from the database is never at the start of a write.
type escapingWriter struct {
	w       io.Writer
	pending []byte // an incomplete UTF-8 sequence at the end of the last write
}

func (e *escapingWriter) Write(p []byte) (int, error) {
	n := len(p)
	buf := append(e.pending, p...)
	e.pending = nil
	// Keep an incomplete rune at the end for the next write.
	for k := 1; k <= utf8.UTFMax-1 && k <= len(buf); k++ {
		if utf8.RuneStart(buf[len(buf)-k]) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				e.pending = append([]byte(nil), buf[len(buf)-k:]...)
				buf = buf[:len(buf)-k]
			}
			break
		}
	}
	lead := ""
	if len(buf) > 0 && buf[0] == '\r' {
		lead, buf = "\r", buf[1:]
	}
	if _, err := io.WriteString(e.w, lead+escapeControl(string(buf))); err != nil {
		return 0, err
	}
	return n, nil
}

// isControl reports a character no typed name or one-line text may hold:
// what escapeControl escapes, and tab and newline too.
func isControl(r rune) bool { return r == '\n' || r == '\t' || needsEscape(r) }
