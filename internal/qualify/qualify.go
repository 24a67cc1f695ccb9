// Package qualify rewrites SQL text so that every function, operator and
// type it names resolves in pg_catalog, whatever the session's search_path
// holds: what PostgreSQL's own extension scripts do by hand.
//
// A bare operator becomes OPERATOR(pg_catalog.op), a bare function call
// pg_catalog.fn(...), and a cast to a bare type name ::pg_catalog.type.
// Names already qualified (pg_catalog.fn, OPERATOR(public.=), "s"."t") and
// type names that are SQL keywords (integer, bigint, boolean, ...: the
// grammar maps them to pg_catalog itself) are left as written.
//
// OPERATOR(...) has one precedence for every operator, so a rewrite is only
// made where it keeps the meaning: SQL refuses, with an error that names
// the construct, an operand run that mixes operators of different
// precedence without parentheses (write a = (b + 1)), and constructs that
// look an operator up by name without a place to qualify it: IN (...)
// (write = ANY (ARRAY[...])), NULLIF, a simple CASE x WHEN (write CASE WHEN
// x = ...), BETWEEN, LIKE, IS DISTINCT FROM, and generic typed literals
// (name 'text').
package qualify

import (
	"fmt"
	"strings"
	"sync"
)

// Catalog is the schema every rewritten name is qualified with.
const Catalog = "pg_catalog"

var cache sync.Map // input -> string or error

// SQL returns s with its functions, operators and types qualified (see the
// package doc), or an error naming a construct it cannot qualify. Results
// are cached: statement texts are few.
func SQL(s string) (string, error) {
	if v, ok := cache.Load(s); ok {
		if err, isErr := v.(error); isErr {
			return "", err
		}
		return v.(string), nil
	}
	out, err := rewrite(s)
	if err != nil {
		cache.Store(s, err)
		return "", err
	}
	cache.Store(s, out)
	return out, nil
}

// Must is SQL for statement texts written in this module: a text it cannot
// qualify is a bug of the module, caught by its tests.
func Must(s string) string {
	out, err := SQL(s)
	if err != nil {
		panic(err)
	}
	return out
}

// Check reports whether s already names every function, operator and type
// the way SQL would write them: nil when SQL(s) would leave s as it is and
// no name that is not a keyword is called with a space before its
// parenthesis (count (*): SQL reads only a name directly followed by "("
// as a call, as this module writes them),
// else an error that quotes the first name SQL would qualify (a bare
// operator, a call of an unqualified function, a cast to an unqualified
// type), or SQL's refusal (IN (...), NULLIF, ...). It reads statements a
// test recorded or built, to prove they need no pinned search_path.
func Check(s string) error {
	out, err := rewrite(s)
	if err != nil {
		return err
	}
	if out == s {
		return spacedCall(s)
	}
	i := 0
	for i < len(s) && i < len(out) && s[i] == out[i] {
		i++
	}
	from := max(0, i-30)
	to := min(len(s), i+30)
	return fmt.Errorf("unqualified at byte %d: ...%s... would be ...%s...", i, s[from:to], out[from:min(len(out), i+50)])
}

// notCalls are keywords, besides syntaxCalls and keywordTypes, that a "("
// may follow after a space.
var notCalls = set("distinct", "ordinality", "group", "order", "having", "materialized", "rows", "range",
	"groups", "within", "by", "view", "function", "procedure", "trigger", "sequence", "type", "domain")

// spacedCall reports a name that is not a keyword called with a space
// before its parenthesis, unqualified: rewrite leaves such a call as it is.
func spacedCall(s string) error {
	toks, err := tokenize(s)
	if err != nil {
		return err
	}
	var sig []int
	for i, t := range toks {
		if t.k != kSpace {
			sig = append(sig, i)
		}
	}
	for n, i := range sig {
		t := toks[i]
		if t.k != kIdent || n+1 >= len(sig) || toks[sig[n+1]].text != "(" || sig[n+1] == i+1 {
			continue
		}
		w := strings.ToLower(t.text)
		prev := ""
		if n > 0 {
			prev = strings.ToLower(toks[sig[n-1]].text)
		}
		if prev == "." || prev == "::" || prev == "as" || syntaxCalls[w] || keywordTypes[w] || notCalls[w] || operandKeywords[w] || isCTEName(toks, sig, n+1) {
			continue
		}
		return fmt.Errorf("unqualified call %s (...) (a space before its parenthesis): write %s.%s(...)", t.text, Catalog, t.text)
	}
	return nil
}

type kind int

const (
	kSpace  kind = iota
	kIdent       // unquoted identifier or keyword
	kQuoted      // "quoted identifier"
	kString      // any string literal, dollar-quoted included
	kNumber
	kParam // $1
	kOp    // operator characters
	kPunct // ( ) [ ] , ; . :: :
)

type token struct {
	k    kind
	text string
}

const opChars = "+-*/<>=~!@#%^&|`?"

func tokenize(s string) ([]token, error) {
	var out []token
	i := 0
	for i < len(s) {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			for i < len(s) && strings.IndexByte(" \t\n\r\f", s[i]) >= 0 {
				i++
			}
			out = append(out, token{kSpace, s[start:i]})
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			out = append(out, token{kSpace, s[start:i]})
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			depth := 0
			for i < len(s) {
				if strings.HasPrefix(s[i:], "/*") {
					depth++
					i += 2
					continue
				}
				if strings.HasPrefix(s[i:], "*/") {
					depth--
					i += 2
					if depth == 0 {
						break
					}
					continue
				}
				i++
			}
			if depth != 0 {
				return nil, fmt.Errorf("unterminated comment")
			}
			out = append(out, token{kSpace, s[start:i]})
		case c == '\'' || ((c == 'E' || c == 'e' || c == 'B' || c == 'b' || c == 'X' || c == 'x' || c == 'N' || c == 'n') && i+1 < len(s) && s[i+1] == '\''):
			backslash := c == 'E' || c == 'e'
			if c != '\'' {
				i++
			}
			i++
			closed := false
			for i < len(s) {
				if backslash && s[i] == '\\' {
					i += 2
					continue
				}
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				i++
			}
			if !closed {
				return nil, fmt.Errorf("unterminated string literal")
			}
			out = append(out, token{kString, s[start:i]})
		case c == '"':
			i++
			closed := false
			for i < len(s) {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				i++
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted identifier")
			}
			out = append(out, token{kQuoted, s[start:i]})
		case c == '$' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			i++
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			out = append(out, token{kParam, s[start:i]})
		case c == '$':
			j := i + 1
			for j < len(s) && isIdentChar(s[j]) && s[j] != '$' {
				j++
			}
			if j >= len(s) || s[j] != '$' {
				return nil, fmt.Errorf("a '$' that starts neither a parameter nor a dollar quote")
			}
			tag := s[i : j+1]
			end := strings.Index(s[j+1:], tag)
			if end < 0 {
				return nil, fmt.Errorf("unterminated dollar quote %s", tag)
			}
			i = j + 1 + end + len(tag)
			out = append(out, token{kString, s[start:i]})
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == '_') {
				if (s[i] == 'e' || s[i] == 'E') && i+1 < len(s) && (s[i+1] == '+' || s[i+1] == '-') {
					i++
				}
				i++
			}
			out = append(out, token{kNumber, s[start:i]})
		case isIdentStart(c):
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			out = append(out, token{kIdent, s[start:i]})
		case c == ':' && i+1 < len(s) && s[i+1] == ':':
			i += 2
			out = append(out, token{kPunct, "::"})
		case strings.IndexByte("()[],;.:", c) >= 0:
			i++
			out = append(out, token{kPunct, s[start:i]})
		case strings.IndexByte(opChars, c) >= 0:
			for i < len(s) && strings.IndexByte(opChars, s[i]) >= 0 {
				if strings.HasPrefix(s[i:], "--") || strings.HasPrefix(s[i:], "/*") {
					break
				}
				i++
			}
			op := s[start:i]
			// A multi-character operator ends in + or - only when it holds
			// one of ~ ! @ # % ^ & | ` ?.
			for len(op) > 1 && (op[len(op)-1] == '+' || op[len(op)-1] == '-') && !strings.ContainsAny(op, "~!@#%^&|`?") {
				op = op[:len(op)-1]
			}
			i = start + len(op)
			out = append(out, token{kOp, op})
		default:
			return nil, fmt.Errorf("unexpected character %q", c)
		}
	}
	return out, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

// syntaxCalls are keywords written like a function call that are not one
// (or whose lookup is not by search_path).
var syntaxCalls = set("coalesce", "greatest", "least", "exists", "any", "all", "some", "array", "row", "values",
	"cast", "extract", "overlay", "position", "substring", "trim", "filter", "over", "lateral", "grouping",
	"as", "on", "using", "in", "not", "and", "or", "when", "then", "else", "case", "where", "select", "from",
	"join", "into", "table", "index", "references", "returning", "conflict", "key", "unique", "check", "primary",
	"with", "recursive", "window", "partition", "by", "default", "is", "set", "update", "delete", "insert",
	"limit", "offset", "union", "except", "intersect", "if", "raise", "perform", "execute", "concurrently",
	"only", "include", "end", "tablesample", "do", "nulls", "collate", "constraint", "foreign", "exclude", "for",
	"distinct", "lock", "returns", "language", "having", "group", "order", "both", "leading", "trailing",
	"xmlelement", "xmlforest", "xmlconcat", "xmlagg", "xmlparse", "xmlpi", "xmlroot", "xmlserialize", "json",
	"interval", "timestamp", "time", "varchar", "char", "character", "numeric", "decimal", "dec", "float", "bit",
	"nchar", "national", "collation", "at", "zone", "escape", "precision", "varying", "without", "local")

// keywordTypes are type names the grammar maps to pg_catalog whatever the
// search_path.
var keywordTypes = set("bigint", "bit", "boolean", "char", "character", "dec", "decimal", "double", "float",
	"int", "integer", "interval", "national", "nchar", "numeric", "real", "smallint", "time", "timestamp",
	"varchar", "setof")

// operandKeywords end an operand like an identifier does.
var operandKeywords = set("null", "true", "false", "end", "current_user", "current_date", "current_timestamp",
	"session_user", "current_role", "localtimestamp", "localtime", "current_time", "current_catalog",
	"current_schema", "user")

// refused are keywords that look up an operator by name where no
// qualification can be written.
var refused = map[string]string{
	"between": "BETWEEN (write x >= a AND x <= b)",
	"like":    "LIKE (write OPERATOR(pg_catalog.~~))",
	"ilike":   "ILIKE (write OPERATOR(pg_catalog.~~*))",
	"similar": "SIMILAR TO",
	"nullif":  "NULLIF (write CASE WHEN a = b THEN NULL ELSE a END)",
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// Precedence classes of binary operators (PostgreSQL's table 4.2).
const (
	precExp = iota + 1
	precMul
	precAdd
	precOther
	precCmp
)

func precedence(op string) int {
	switch op {
	case "^":
		return precExp
	case "*", "/", "%":
		return precMul
	case "+", "-":
		return precAdd
	case "<", ">", "=", "<=", ">=", "<>", "!=":
		return precCmp
	}
	return precOther
}

// level is one parenthesis (or CASE ... END) level of the expression.
type level struct {
	prec int // precedence class of the binary operators of the current run, 0: none yet
	// setClause: the level is an UPDATE's SET list, where "col =" assigns.
	setClause bool
	caseEnd   bool // the level was opened by CASE and closes at END
}

func rewrite(s string) (string, error) {
	toks, err := tokenize(s)
	if err != nil {
		return "", err
	}
	// sig lists the indexes of the non-space tokens.
	var sig []int
	for i, t := range toks {
		if t.k != kSpace {
			sig = append(sig, i)
		}
	}
	lower := func(n int) string {
		if n < 0 || n >= len(sig) {
			return ""
		}
		t := toks[sig[n]]
		if t.k != kIdent {
			return ""
		}
		return strings.ToLower(t.text)
	}
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.text
	}
	isOperand := func(n int) bool {
		if n < 0 {
			return false
		}
		t := toks[sig[n]]
		switch t.k {
		case kQuoted, kString, kNumber, kParam:
			return true
		case kPunct:
			return t.text == ")" || t.text == "]"
		case kIdent:
			w := strings.ToLower(t.text)
			if operandKeywords[w] {
				return true
			}
			return !syntaxCalls[w] && !keywordTypes[w] || keywordTypes[w] && n > 0 && toks[sig[n-1]].text == "::" ||
				w == "precision" || w == "zone" || w == "varying"
		}
		return false
	}
	levels := []level{{}}
	top := func() *level { return &levels[len(levels)-1] }
	skipTo := -1 // the closing parenthesis of an OPERATOR(...) being copied
	for n, i := range sig {
		if n <= skipTo {
			continue
		}
		t := toks[i]
		prevText := ""
		if n > 0 {
			prevText = toks[sig[n-1]].text
		}
		adjacentParen := i+1 < len(toks) && toks[i+1].text == "("
		switch t.k {
		case kPunct:
			switch t.text {
			case "(", "[":
				levels = append(levels, level{})
			case ")", "]":
				if len(levels) > 1 {
					levels = levels[:len(levels)-1]
				}
			case ",", ";", ":":
				top().prec = 0
			}
		case kIdent:
			w := strings.ToLower(t.text)
			if msg, bad := refused[w]; bad {
				return "", fmt.Errorf("cannot qualify %s: it looks up an operator by name", msg)
			}
			switch {
			case w == "in" && n+1 < len(sig) && toks[sig[n+1]].text == "(":
				return "", fmt.Errorf("cannot qualify IN (...): it looks up = by name (write = ANY (ARRAY[...]))")
			case w == "distinct" && lower(n+1) == "from":
				return "", fmt.Errorf("cannot qualify IS DISTINCT FROM: it looks up = by name")
			case w == "case":
				if n+1 < len(sig) && lower(n+1) != "when" {
					return "", fmt.Errorf("cannot qualify a simple CASE x WHEN: it looks up = by name (write CASE WHEN x = ...)")
				}
				levels = append(levels, level{caseEnd: true})
				continue
			case w == "end":
				if top().caseEnd && len(levels) > 1 {
					levels = levels[:len(levels)-1]
				}
				continue
			case w == "operator" && n+1 < len(sig) && toks[sig[n+1]].text == "(":
				// OPERATOR(schema.op): already qualified; its operator
				// class is "other".
				if err := noteBinary(top(), precOther); err != nil {
					return "", err
				}
				for skipTo = n + 1; skipTo < len(sig) && toks[sig[skipTo]].text != ")"; skipTo++ {
				}
				continue
			case w == "set":
				top().prec = 0
				top().setClause = true
				continue
			case w == "where" || w == "from" || w == "returning":
				top().setClause = false
			}
			if prevText == "::" {
				if !keywordTypes[w] && !(n+1 < len(sig) && toks[sig[n+1]].text == ".") {
					out[i] = Catalog + "." + t.text
				}
				continue
			}
			if w == "unnest" && adjacentParen && hasTopLevelComma(toks, sig, n+1) {
				// unnest(a, b) in FROM is the grammar's ROWS FROM (unnest(a),
				// unnest(b)), which calls pg_catalog's; only the bare name is
				// read that way.
				continue
			}
			if adjacentParen && isCTEName(toks, sig, n+1) {
				continue
			}
			if adjacentParen && prevText != "." && !strings.EqualFold(prevText, "as") && !syntaxCalls[w] && !keywordTypes[w] && !(n+1 < len(sig) && toks[sig[n+1]].text == ".") {
				out[i] = Catalog + "." + t.text
				continue
			}
			if !syntaxCalls[w] && !keywordTypes[w] && !operandKeywords[w] && n+1 < len(sig) && toks[sig[n+1]].k == kString && prevText != "." {
				return "", fmt.Errorf("cannot qualify the typed literal %s '...': write '...'::%s.%s", t.text, Catalog, t.text)
			}
			if !isOperand(n) {
				// A keyword ends the operand run.
				top().prec = 0
			}
		case kQuoted:
			if prevText == "::" && !(n+1 < len(sig) && toks[sig[n+1]].text == ".") {
				out[i] = Catalog + "." + t.text
			}
		case kOp:
			op := t.text
			if op == "=>" {
				continue // named argument
			}
			if op == "*" && !isOperand(n-1) {
				continue // SELECT *, count(*), t.*
			}
			if op == "=" && top().setClause && n >= 2 {
				// col = value in an UPDATE's SET list.
				before := toks[sig[n-2]].text
				if strings.EqualFold(before, "set") || before == "," {
					top().prec = 0
					continue
				}
			}
			if isOperand(n - 1) {
				if err := noteBinary(top(), precedence(op)); err != nil {
					return "", fmt.Errorf("%w in %q", err, excerpt(toks, sig, n))
				}
			} else if top().prec != 0 {
				return "", fmt.Errorf("cannot qualify the prefix operator %s after another operator without parentheses in %q", op, excerpt(toks, sig, n))
			} else {
				top().prec = precOther
			}
			out[i] = "OPERATOR(" + Catalog + "." + op + ")"
			// A prefix operator needs a space before its operand when the
			// operator was glued to it (-1).
			if i+1 < len(toks) && toks[i+1].k != kSpace {
				out[i] += " "
			}
			if i > 0 && toks[i-1].k != kSpace {
				out[i] = " " + out[i]
			}
		}
	}
	return strings.Join(out, ""), nil
}

// isCTEName reports whether the parenthesis at sig[open] is a column list
// of a WITH query, name(a, b) AS (...), rather than a call's arguments.
func isCTEName(toks []token, sig []int, open int) bool {
	depth := 0
	for j := open; j < len(sig); j++ {
		switch toks[sig[j]].text {
		case "(", "[":
			depth++
		case ")", "]":
			depth--
			if depth == 0 {
				if j+2 >= len(sig) || !strings.EqualFold(toks[sig[j+1]].text, "as") {
					return false
				}
				next := strings.ToLower(toks[sig[j+2]].text)
				return next == "(" || next == "materialized" || next == "not"
			}
		}
	}
	return false
}

// hasTopLevelComma reports whether the parenthesis at sig[open] holds a
// comma of its own (a call with several arguments).
func hasTopLevelComma(toks []token, sig []int, open int) bool {
	depth := 0
	for _, i := range sig[open:] {
		switch toks[i].text {
		case "(", "[":
			depth++
		case ")", "]":
			depth--
			if depth == 0 {
				return false
			}
		case ",":
			if depth == 1 {
				return true
			}
		}
	}
	return false
}

// noteBinary records a binary operator of class p in l's current run and
// refuses a run whose classes differ: with OPERATOR(...) they would all
// bind alike.
func noteBinary(l *level, p int) error {
	if l.prec != 0 && l.prec != p {
		return fmt.Errorf("cannot qualify operators of different precedence without parentheses")
	}
	if p == precCmp && l.prec == precCmp {
		return fmt.Errorf("cannot qualify two comparisons in one run")
	}
	l.prec = p
	return nil
}

func excerpt(toks []token, sig []int, n int) string {
	from, to := n-4, n+4
	if from < 0 {
		from = 0
	}
	if to >= len(sig) {
		to = len(sig) - 1
	}
	var b strings.Builder
	for _, i := range sig[from : to+1] {
		b.WriteString(toks[i].text)
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String())
}
