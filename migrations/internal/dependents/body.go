package dependents

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokenKind is what a token of a function body is.
type tokenKind int

const (
	word             tokenKind = iota // an unquoted identifier or keyword
	quotedIdentifier                  // a "quoted identifier", unescaped
	literal                           // a string: '...', E'...' or $tag$...$tag$, unescaped
)

type token struct {
	kind tokenKind
	text string
}

// tokens splits a function body stored as text (plpgsql, a SQL string body,
// any procedural language that quotes as SQL does) into identifiers and
// strings, leaving out comments, numbers and punctuation.
func tokens(src string) []token {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case strings.HasPrefix(src[i:], "--"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case strings.HasPrefix(src[i:], "/*"):
			depth, j := 0, i
			for j < len(src) {
				switch {
				case strings.HasPrefix(src[j:], "/*"):
					depth++
					j += 2
				case strings.HasPrefix(src[j:], "*/"):
					depth--
					j += 2
				default:
					j++
				}
				if depth == 0 {
					break
				}
			}
			i = j
		case c == '\'':
			text, n := quotedString(src[i:], false)
			out = append(out, token{literal, text})
			i += n
		case c == '"':
			text, n := quotedIdent(src[i:])
			out = append(out, token{quotedIdentifier, text})
			i += n
		case c == '$':
			if tag, ok := dollarTag(src[i:]); ok {
				rest := src[i+len(tag):]
				end := strings.Index(rest, tag)
				if end < 0 {
					out = append(out, token{literal, rest})
					return out
				}
				out = append(out, token{literal, rest[:end]})
				i += len(tag) + end + len(tag)
				continue
			}
			i++
		case isIdentStart(src[i:]):
			j := i
			for j < len(src) && isIdentPart(src[j:]) {
				_, size := utf8.DecodeRuneInString(src[j:])
				j += size
			}
			w := src[i:j]
			if (w == "E" || w == "e") && j < len(src) && src[j] == '\'' {
				text, n := quotedString(src[j:], true)
				out = append(out, token{literal, text})
				i = j + n
				continue
			}
			out = append(out, token{word, w})
			i = j
		default:
			i++
		}
	}
	return out
}

func isIdentStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

func isIdentPart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// quotedString reads a quoted string at the start of s (a doubled quote is a quote;
// backslash escapes too when escapes is set) and returns its text and length.
func quotedString(s string, escapes bool) (string, int) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case escapes && s[i] == '\\' && i+1 < len(s):
			i++
			if r, ok := map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f'}[s[i]]; ok {
				b.WriteByte(r)
			} else {
				b.WriteByte(s[i])
			}
		case s[i] == '\'' && i+1 < len(s) && s[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case s[i] == '\'':
			return b.String(), i + 1
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), len(s)
}

// quotedIdent reads a "..." identifier at the start of s.
func quotedIdent(s string) (string, int) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '"' && i+1 < len(s) && s[i+1] == '"':
			b.WriteByte('"')
			i++
		case s[i] == '"':
			return b.String(), i + 1
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), len(s)
}

var dollarTagRE = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)?\$`)

// dollarTag returns the $tag$ that opens a dollar-quoted string at the
// start of s ($1, a parameter, is not one).
func dollarTag(s string) (string, bool) {
	m := dollarTagRE.FindString(s)
	return m, m != ""
}

// refersTo says whether a body that runs after the key column is renamed
// from column to rename still refers to the old name: as code (see names),
// or as a value (a string that is exactly the name, as in
// to_jsonb(NEW)->>'unique_key') unless the body also names the new name,
// which is how a function is written to work under both names.
func refersTo(ts []token, column, rename string) bool {
	return names(ts, column) || isValue(ts, column) && !names(ts, rename) && !isValue(ts, rename)
}

// isValue says whether a body has a string that is exactly name.
func isValue(ts []token, name string) bool {
	for _, t := range ts {
		if t.kind == literal && t.text == name {
			return true
		}
	}
	return false
}

// names says whether a body names the identifier name (lower case) as code:
// as an unquoted word (folded to lower case, as PostgreSQL does), as a
// quoted identifier, or inside a string as a word, which dynamic SQL runs.
// A string that is exactly the name is a value (isValue), not code.
func names(ts []token, name string) bool {
	for _, t := range ts {
		switch t.kind {
		case word:
			if strings.ToLower(t.text) == name {
				return true
			}
		case quotedIdentifier:
			if t.text == name {
				return true
			}
		case literal:
			if t.text != name && containsWord(t.text, name) {
				return true
			}
		}
	}
	return false
}

// namesTable says whether a body names a table: as an unquoted word (when
// the name is lower case), a quoted identifier, or a word inside a string.
func namesTable(ts []token, table string) bool {
	for _, t := range ts {
		switch t.kind {
		case word:
			if strings.ToLower(t.text) == table {
				return true
			}
		case quotedIdentifier:
			if t.text == table {
				return true
			}
		case literal:
			if containsWord(t.text, table) {
				return true
			}
		}
	}
	return false
}

// containsWord reports name in s as a whole identifier (case-insensitive,
// as an unquoted identifier would be read).
func containsWord(s, name string) bool {
	ls, ln := strings.ToLower(s), strings.ToLower(name)
	for from := 0; ; {
		i := strings.Index(ls[from:], ln)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(ln)
		if (i == 0 || !isIdentPart(ls[i-1:])) && (end == len(ls) || !isIdentPart(ls[end:])) {
			return true
		}
		from = i + 1
	}
}
