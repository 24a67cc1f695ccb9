package compat

import (
	"errors"
	"reflect"
)

// sqlState returns the SQLSTATE of the first error in err's chain that
// carries one, whichever driver produced it, or "". The runtime never
// imports a driver to read it (River's habit): pgx's *pgconn.PgError and
// lib/pq's *pq.Error (v1.10.6 and later) have a SQLState method; lib/pq's
// older releases have only their Code field, read by reflection.
func sqlState(err error) string {
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		return st.SQLState()
	}
	var code string
	walk(err, func(e error) bool {
		code = codeField(e)
		return code != ""
	})
	return code
}

// walk calls visit on err and every error it wraps, depth first, until
// visit returns true.
func walk(err error, visit func(error) bool) bool {
	if err == nil {
		return false
	}
	if visit(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walk(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if walk(e, visit) {
				return true
			}
		}
	}
	return false
}

// codeField reads a driver error's string field Code (lib/pq before
// v1.10.6: type ErrorCode string) when it holds a SQLSTATE: five digits or
// upper-case letters.
func codeField(err error) string {
	v := reflect.ValueOf(err)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return ""
	}
	f := v.FieldByName("Code")
	if !f.IsValid() || f.Kind() != reflect.String {
		return ""
	}
	if s := f.String(); isSQLState(s) {
		return s
	}
	return ""
}

func isSQLState(s string) bool {
	if len(s) != 5 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}
