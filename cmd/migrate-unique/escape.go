package main

import (
	"io"
	"unicode/utf8"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
)

// escapeControl renders s for a terminal: every control character (C0 but
// tab and newline, DEL, C1) and every bidirectional override is written as
// a \uXXXX escape, so that a group name, key, reason, job or table name
// read from the database can neither move the cursor, recolour nor reorder
// what the operator reads. \uXXXX is also a valid escape inside a JSON
// string, so JSON output stays valid and means the same.
func escapeControl(s string) string { return groupstatus.EscapeControl(s) }

// escapeName renders a name (a group, a class) on one line: as
// escapeControl, and a newline or tab in it escaped too. The escapes are
// those of bash's $'...' quoting, so $'<what is shown>' types the name back
// (shellArg writes it so).
func escapeName(s string) string { return groupstatus.EscapeName(s) }

func needsEscape(r rune) bool { return groupstatus.NeedsEscape(r) }

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

// isControl reports a character no typed name or one-line text may hold.
func isControl(r rune) bool { return groupstatus.IsControl(r) }
