// Package pgurl resolves the database URL a command works on, parses it,
// connects to it, and renders it for output without its password.
//
// Redaction never guesses where a password is. Where the connection string
// parses, the password is the one pgx parsed (so every spelling of it that
// the input can carry is known); where it does not, nothing of the input is
// printed except what cannot hold a password: the scheme, and the host when
// the string leaves no doubt about where it is.
package pgurl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// EnvVar is the environment variable --database falls back to.
const EnvVar = "DATABASE_URL"

// ErrMissing is returned by Resolve when neither the flag nor the
// environment names a database.
var ErrMissing = errors.New("no database given: pass --database postgres://user@host:5432/dbname or set " + EnvVar)

// Resolve returns flagValue, else $DATABASE_URL, else ErrMissing.
func Resolve(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := os.Getenv(EnvVar); v != "" {
		return v, nil
	}
	return "", ErrMissing
}

// ParseError says that a connection string could not be parsed. Its text
// quotes nothing of the input but Scheme and Host, which hold no password.
type ParseError struct {
	// Form is "URL" or "key=value string".
	Form string
	// Scheme is the URL's scheme ("postgres"), or "".
	Scheme string
	// Host is the URL's host (and port) when it is unambiguous, else "".
	Host string
	// Reason says what is wrong, without quoting the input.
	Reason string
}

// Error names the form, the scheme and host when known, and the reason.
func (e *ParseError) Error() string {
	where := ""
	switch {
	case e.Scheme != "" && e.Host != "":
		where = fmt.Sprintf(" (%s://…%s…)", e.Scheme, e.Host)
	case e.Scheme != "":
		where = fmt.Sprintf(" (%s://…)", e.Scheme)
	}
	return fmt.Sprintf("cannot parse the database %s%s: %s; expected postgres://user:password@host:5432/dbname (percent-encode @ : / ? # %% and spaces in the user name and password) or host=... user=... dbname=...", e.Form, where, e.Reason)
}

var schemeRE = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*)://`)

// hostRE matches a host list that holds nothing but host names, addresses
// and ports.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9._\-\[\]:,]+$`)

// isURL reports whether pgx reads s as a URL (anything else is read as a
// key=value string).
func isURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// ParseConfig parses a connection string, URL or key=value, as pgx does,
// and rejects a URL whose user information is ambiguous (an '@' that could
// belong to the password), because pgx would then read part of the
// password as the host or the database name and print it in its errors.
// Its error is a *ParseError.
func ParseConfig(s string) (*pgx.ConnConfig, error) {
	if perr := ambiguity(s); perr != nil {
		return nil, perr
	}
	cfg, err := pgx.ParseConfig(s)
	if err != nil {
		return nil, parseFailure(s, err)
	}
	return cfg, nil
}

// ambiguity rejects URLs in which libpq's reading of '@' (the first '@'
// before a '/' ends the user information) may differ from the user's.
func ambiguity(s string) *ParseError {
	if !isURL(s) {
		if strings.Contains(s, "://") {
			return newParseError(s, "a URL must start with postgres:// or postgresql://")
		}
		return nil
	}
	rest := s[strings.Index(s, "://")+3:]
	authority, path, _ := strings.Cut(rest, "/")
	switch {
	case strings.Count(authority, "@") > 1:
		return newParseError(s, "more than one '@' before the database name: percent-encode an '@' in the user name or password as %40")
	case strings.Contains(path, "@"):
		return newParseError(s, "an '@' after the first '/': if the password holds a '/', percent-encode it as %2F (and an '@' in a database name or parameter as %40)")
	}
	return nil
}

// parseFailure turns pgx's parse error, which may quote the input, into a
// ParseError that does not.
func parseFailure(s string, err error) *ParseError {
	reason := "it is neither a valid URL nor a valid key=value string"
	var pathErr *fs.PathError
	// Only matched against, never printed: it may quote the input.
	msg := err.Error()
	switch {
	case errors.As(err, &pathErr):
		reason = fmt.Sprintf("a file it names (sslrootcert, sslcert, sslkey, passfile or servicefile) cannot be read: %v", pathErr.Err)
	case strings.Contains(msg, "forbidden NUL byte"):
		reason = "it contains a NUL byte"
	case strings.Contains(msg, "unterminated quoted string"):
		reason = "a quoted value is not closed (a quote inside a value is written \\')"
	case strings.Contains(msg, `missing "=" after`):
		reason = "a word without '=' (quote a value that contains spaces: password='a b')"
	case strings.Contains(msg, "invalid keyword/value"):
		reason = "a setting is not written keyword=value"
	case strings.Contains(msg, "invalid percent-encoded") || strings.Contains(msg, "invalid URL escape") || strings.Contains(msg, "percent"):
		reason = "a '%' is not followed by two hexadecimal digits (write a literal '%' as %25)"
	case strings.Contains(msg, "IPv6"):
		reason = "an IPv6 host address in brackets is not closed or empty"
	case strings.Contains(msg, "invalid port") || strings.Contains(msg, "port"):
		reason = "a port is not a number between 1 and 65535"
	case strings.Contains(msg, "sslmode is invalid"):
		reason = "sslmode is not one of disable, allow, prefer, require, verify-ca, verify-full"
	case strings.Contains(msg, "timeout"):
		reason = "connect_timeout is not a non-negative number of seconds"
	case strings.Contains(msg, "unknown sslcertmode"):
		reason = "sslcertmode is not one of disable, allow, require"
	}
	return newParseError(s, reason)
}

func newParseError(s, reason string) *ParseError {
	e := &ParseError{Form: "key=value string", Reason: reason}
	if m := schemeRE.FindStringSubmatch(s); m != nil {
		e.Form, e.Scheme, e.Host = "URL", m[1], unambiguousHost(s[len(m[0]):])
	}
	return e
}

// unambiguousHost returns the host part of a URL that failed to parse, when
// it cannot hold any part of a password: the user information ends at the
// only '@' of the string, before any '/', or there is no user information
// and no ':' that could separate one.
func unambiguousHost(rest string) string {
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	var host string
	switch strings.Count(rest, "@") {
	case 0:
		if strings.Contains(authority, ":") {
			return ""
		}
		host = authority
	case 1:
		at := strings.Index(authority, "@")
		if at < 0 {
			return ""
		}
		host = authority[at+1:]
	default:
		return ""
	}
	if !hostRE.MatchString(host) {
		return ""
	}
	return host
}

// CancelWait bounds how long a statement whose context is done may take to
// end on the server once it has been sent a cancel request (see
// CancelOnDone); after it the connection is dropped.
const CancelWait = 30 * time.Second

// CancelOnDone makes the connections of cfg send the server a cancel
// request as soon as the context of a running statement is done, and wait
// (at most CancelWait) for the server to end the statement before the call
// returns: the statement fails with SQLSTATE 57014 and the connection stays
// usable. pgx's default only drops the connection, and the server goes on
// with the statement until it next writes to the client (a CREATE INDEX
// CONCURRENTLY runs to its end, holding the session's locks).
func CancelOnDone(cfg *pgconn.Config) {
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: CancelWait}
	}
}

// SearchPath is the search_path every session the tool opens starts with,
// sent as a startup parameter (the way PostgreSQL's extension scripts and
// SECURITY DEFINER functions pin theirs): functions, operators and types
// resolve in pg_catalog only, so an object another role created in a
// schema of the role's or the database's search path (public, "$user")
// never runs in the tool's session, however well its arguments match. The
// queue's own tables are always named with their schema. pg_temp is listed
// last so that no temporary object shadows a table either.
const SearchPath = "pg_catalog, pg_temp"

// Pinned reports whether conn's session started with SearchPath. It did not
// when a pooler refused the startup parameter and Connect connected again
// without it: then each transaction that must resolve names safely starts
// with SET LOCAL search_path = SearchPath (PinTx, Run).
func Pinned(conn *pgx.Conn) bool {
	return conn.Config().RuntimeParams["search_path"] == SearchPath
}

// PinTx opens a transaction on conn whose first statement pins its
// search_path to SearchPath for the rest of the transaction. Through a
// transaction-mode pooler, a transaction runs on one server connection and
// SET LOCAL ends with it, so nothing reaches other clients.
func PinTx(ctx context.Context, conn *pgx.Conn) (pgx.Tx, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path = "+SearchPath); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil
}

// Handle is what *pgx.Conn and pgx.Tx have in common: what Run gives the
// work it runs (compat.Pgx takes it too).
type Handle interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Run runs f, one unit of a command's work, on conn: on the connection
// itself when its session is pinned (Pinned); else in one transaction whose
// first statement pins its search_path (PinTx), committed when f returns
// nil and rolled back when it fails. Through a transaction-mode pooler a
// transaction keeps one server connection, so every statement f sends runs
// under the pin, and the pin ends with the transaction. f must not commit,
// and must not go on after a statement failed (the transaction is then
// aborted): it returns the error.
func Run(ctx context.Context, conn *pgx.Conn, f func(Handle) error) error {
	if Pinned(conn) {
		return f(conn)
	}
	tx, err := PinTx(ctx, conn)
	if err != nil {
		return fmt.Errorf("pin the search_path of a session the pooler started without it: %w", err)
	}
	// Rolled back unless committed, a panic in f included, so that the
	// connection is never left inside the transaction.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Pin makes the sessions of cfg start with SearchPath.
func Pin(cfg *pgconn.Config) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["search_path"] = SearchPath
}

// unsupportedStartup reports whether err is a pooler's refusal of a startup
// parameter it does not know (PgBouncer: "unsupported startup parameter:
// search_path", unless listed in its ignore_startup_parameters or
// track_extra_parameters).
func unsupportedStartup(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "unsupported startup parameter")
}

type tracerKey struct{}

// WithTracer returns a context under which Connect gives the connections
// it opens tr as their query tracer (pgx.ConnConfig.Tracer): for tests and
// diagnostics that record every statement a command sends.
func WithTracer(ctx context.Context, tr pgx.QueryTracer) context.Context {
	return context.WithValue(ctx, tracerKey{}, tr)
}

// Connect parses s and connects. Statements run in pgx's exec mode (each
// one a single round trip with an unnamed statement), so no prepared
// statement outlives its statement on the server connection: through a
// transaction-mode pooler, named statements left on a server connection
// collide with the next client's (42P05) or are missing on the next one's
// (26000). applicationName, when not empty, names the session in
// pg_stat_activity. A statement whose context is done is cancelled on the
// server (CancelOnDone). While the server has no connection slot to spare
// (53300, too many clients) it tries again for about ten seconds. Errors
// never show the password.
//
// The session is pinned to SearchPath (Pin). A pooler that refuses the
// startup parameter (PgBouncer without search_path in
// track_extra_parameters) is connected to again without it (Pinned then
// reports false): the read-only commands and the concurrency commands then
// run their statements in transactions that pin the search_path first
// (PinTx, Run), and up and down refuse the pooler.
func Connect(ctx context.Context, s, applicationName string) (*pgx.Conn, error) {
	cfg, err := ParseConfig(s)
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	CancelOnDone(&cfg.Config)
	if applicationName != "" {
		cfg.RuntimeParams["application_name"] = applicationName
	}
	Pin(&cfg.Config)
	if tr, ok := ctx.Value(tracerKey{}).(pgx.QueryTracer); ok {
		cfg.Tracer = tr
	}
	for delay := 50 * time.Millisecond; ; delay *= 2 {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn, nil
		}
		if unsupportedStartup(err) {
			if _, pinned := cfg.RuntimeParams["search_path"]; pinned {
				delete(cfg.RuntimeParams, "search_path")
				continue
			}
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "53300" || delay > 5*time.Second {
			return nil, RedactError(s, fmt.Errorf("connect to %s: %w", Describe(s), connectFailure(err)))
		}
		select {
		case <-ctx.Done():
			return nil, RedactError(s, fmt.Errorf("connect to %s: %w", Describe(s), connectFailure(err)))
		case <-time.After(delay):
		}
	}
}

// tlsRefused is how pgx reports a server that does not offer TLS.
const tlsRefused = "tls error: server refused TLS connection"

// connectFailure renders pgx's failed connection with one line per cause:
// an attempt that only found the server without TLS is left out when
// another attempt went further (sslmode prefer and allow go on without
// TLS, so the real cause is the next attempt's, e.g. a wrong password),
// and an attempt that failed exactly as an earlier one is said once (a
// refused dial is tried with and without TLS). err stays unwrappable.
func connectFailure(err error) error {
	var ce *pgconn.ConnectError
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &ce) || !errors.As(ce.Unwrap(), &joined) {
		return err
	}
	attempts := joined.Unwrap()
	onlyTLS := true
	for _, a := range attempts {
		onlyTLS = onlyTLS && strings.HasSuffix(a.Error(), tlsRefused)
	}
	var lines []string
	seen := map[string]bool{}
	for _, a := range attempts {
		line := a.Error()
		if seen[line] || !onlyTLS && strings.HasSuffix(line, tlsRefused) {
			continue
		}
		seen[line] = true
		lines = append(lines, line)
	}
	msg := fmt.Sprintf("failed to connect to `user=%s database=%s`: %s", ce.Config.User, ce.Config.Database, lines[0])
	if len(lines) > 1 {
		msg = fmt.Sprintf("failed to connect to `user=%s database=%s`:\n\t%s", ce.Config.User, ce.Config.Database, strings.Join(lines, "\n\t"))
	}
	return &redacted{msg: msg, err: err}
}

// Describe renders a connection string for a progress line: host, port and
// database, no credentials. A string that does not parse is rendered as
// its scheme and unambiguous host only.
func Describe(s string) string {
	cfg, err := ParseConfig(s)
	if err != nil {
		var pe *ParseError
		errors.As(err, &pe)
		switch {
		case pe.Host != "":
			return fmt.Sprintf("%s://…%s… (unparsable URL)", pe.Scheme, pe.Host)
		case pe.Scheme != "":
			return pe.Scheme + "://… (unparsable URL)"
		}
		return "(unparsable key=value string)"
	}
	host := cfg.Host
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "/") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d/%s", host, cfg.Port, cfg.Database)
}

// Redact returns s with its password replaced by "xxxxx", for a URL a user
// may copy. A key=value string with a password, and a string that does not
// parse, are rendered as Describe does.
func Redact(s string) string {
	cfg, err := ParseConfig(s)
	if err != nil {
		return Describe(s)
	}
	u, err := url.Parse(s)
	if !isURL(s) || err != nil {
		return Describe(s)
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	out := maskPassword(u.String(), cfg.Password)
	if leaks(out, cfg.Password) {
		return Describe(s)
	}
	return out
}

// RedactError wraps err so that its text never shows the password of the
// connection string s. Where s parses, every spelling of its password is
// masked; where it does not, the message is kept only if it is a
// *ParseError (which quotes nothing) or does not contain s at all.
func RedactError(s string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if s != "" {
		msg = strings.ReplaceAll(msg, s, Describe(s))
	}
	cfg, perr := ParseConfig(s)
	switch {
	case perr == nil:
		msg = maskPassword(msg, cfg.Password)
	case isParseError(err):
		// Built from the scheme and host alone.
	default:
		// The input did not parse, so which part of it is the password is
		// unknown: keep nothing of a message that may quote it.
		msg = perr.Error()
	}
	return &redacted{msg: msg, err: err}
}

func isParseError(err error) bool {
	var pe *ParseError
	return errors.As(err, &pe)
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// minMasked is the shortest password masked wherever it occurs in a
// message: masking every occurrence of a shorter one would mask ordinary
// words (a password "a" would mask every letter a). Shorter passwords are
// still never printed as part of a connection string.
const minMasked = 4

// maskPassword replaces pw in every spelling a connection string or a
// message quoting one can carry: raw, percent-encoded, quoted for a
// key=value string.
func maskPassword(msg, pw string) string {
	if len(pw) < minMasked {
		return msg
	}
	for _, form := range passwordForms(pw) {
		msg = strings.ReplaceAll(msg, form, "xxxxx")
	}
	return msg
}

func passwordForms(pw string) []string {
	forms := []string{
		url.PathEscape(pw), url.QueryEscape(pw), url.UserPassword("u", pw).String()[2:],
		strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw),
		strconv.Quote(pw)[1 : len(strconv.Quote(pw))-1],
		pw,
	}
	// Longest first, so a shorter form never splits a longer one.
	for i := range forms {
		for j := i + 1; j < len(forms); j++ {
			if len(forms[j]) > len(forms[i]) {
				forms[i], forms[j] = forms[j], forms[i]
			}
		}
	}
	return forms
}

// leaks reports whether any spelling of pw is still in s.
func leaks(s, pw string) bool {
	if len(pw) < minMasked {
		return false
	}
	for _, form := range passwordForms(pw) {
		if strings.Contains(s, form) {
			return true
		}
	}
	return false
}
