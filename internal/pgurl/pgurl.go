// Package pgurl resolves the database URL a command works on and renders
// it for output with the password removed.
package pgurl

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
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

var kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// urlPassword finds the password of a URL that net/url cannot parse, such as
// one whose password holds an unencoded '/', '?', '#' or space: everything
// from the first ':' after the scheme's "//" to the last '@' (redacting too
// much is better than too little).
var urlPassword = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://[^:@/]*:)(.*)@`)

// Redact returns s with any password replaced by "xxxxx". It handles URLs
// (postgres://user:secret@host/db, ?password=secret) and keyword/value
// connection strings (password=secret). Use it on every URL and on every
// error text that may quote one before it reaches output.
func Redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host+u.Path+u.RawQuery != "" && strings.Contains(s, "://") {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	if urlPassword.MatchString(s) {
		return urlPassword.ReplaceAllString(s, "${1}xxxxx@")
	}
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}

// RedactError wraps err so that its text never shows the password of url.
func RedactError(url string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if pw := password(url); pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	msg = strings.ReplaceAll(msg, url, Redact(url))
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

func password(s string) string {
	if u, err := url.Parse(s); err == nil {
		if pw, ok := u.User.Password(); ok {
			return pw
		}
		if pw := u.Query().Get("password"); pw != "" {
			return pw
		}
	} else if m := urlPassword.FindStringSubmatch(s); m != nil {
		return m[2]
	}
	if m := kvPassword.FindStringSubmatch(s); m != nil {
		return strings.Trim(m[2], "'")
	}
	return ""
}

// Describe renders a URL for a progress line: host, port and database, no
// credentials.
func Describe(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return Redact(s)
	}
	host := u.Host
	if h := u.Query().Get("host"); h != "" {
		host = h
	}
	return fmt.Sprintf("%s/%s", host, strings.TrimPrefix(u.Path, "/"))
}
