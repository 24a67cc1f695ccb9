package compat

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lib/pq"
)

// oldPQError has the shape of lib/pq's Error before v1.10.6, which had no
// SQLState method: a string-typed Code field.
type oldPQError struct {
	Code    oldPQCode
	Message string
}

type oldPQCode string

func (e *oldPQError) Error() string { return "pq: " + e.Message }

// notADriverError has a Code field that is not a SQLSTATE.
type notADriverError struct{ Code string }

func (e notADriverError) Error() string { return e.Code }

// The stale-schema recovery and the span's error type read the SQLSTATE of
// every driver's error, wrapped or joined: pgx's, lib/pq's (its SQLState
// method, and the Code field of its releases before the method), and
// nothing from an error that only looks similar.
func TestSQLStateOfEveryDriver(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"pgx", &pgconn.PgError{Code: "42703"}, "42703"},
		{"pgx wrapped", fmt.Errorf("compat: enqueue: %w", &pgconn.PgError{Code: "42P01"}), "42P01"},
		{"lib/pq", &pq.Error{Code: "42703"}, "42703"},
		{"lib/pq wrapped", fmt.Errorf("compat: enqueue: %w", &pq.Error{Code: "55P03"}), "55P03"},
		{"lib/pq before v1.10.6", &oldPQError{Code: "42703", Message: `column "unique_key" does not exist`}, "42703"},
		{"lib/pq before v1.10.6, joined", errors.Join(errors.New("rollback"), fmt.Errorf("enqueue: %w", &oldPQError{Code: "42P01"})), "42P01"},
		{"a Code that is no SQLSTATE", notADriverError{Code: "not found"}, ""},
		{"plain", errors.New("boom"), ""},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sqlState(tc.err); got != tc.want {
				t.Fatalf("sqlState(%v) = %q, want %q", tc.err, got, tc.want)
			}
			if stale := tc.want == "42703" || tc.want == "42P01"; isStaleSchema(tc.err) != stale {
				t.Fatalf("isStaleSchema(%v) = %v, want %v", tc.err, !stale, stale)
			}
		})
	}
}
