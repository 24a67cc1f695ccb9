package migrations_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

const seedRows = 1000

// legacyDB returns a fresh database holding the legacy schema s, seeded.
func legacyDB(t *testing.T, s legacy.Schema) string {
	t.Helper()
	return testdb.New(t, testdb.FromTemplate(s.Key(seedRows), func(ctx context.Context, url string) error {
		return s.LoadURL(ctx, url, seedRows)
	}))
}

// snapshot is everything a round trip must restore: index and constraint
// definitions, columns and a digest over every row of every table.
type snapshot struct {
	indexes, constraints, columns []string
	digest                        map[string]string
	tables                        []string
}

func takeSnapshot(t *testing.T, url string, raw layout.Layout) snapshot {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Connect(t, url)
	// Closed at once: a session whose last statement names unique_key
	// counts as the old application version for complete.
	defer conn.Close(ctx)
	l, err := raw.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot
	s.digest = map[string]string{}
	query := func(sql string, args ...any) []string {
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(out)
		return out
	}
	s.indexes = query(`SELECT pg_get_indexdef(x.indexrelid) || CASE WHEN x.indisvalid THEN '' ELSE ' INVALID' END FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, l.Schema)
	s.constraints = query(`SELECT c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1`, l.Schema)
	s.columns = query(`SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped`, l.Schema)
	s.tables = query(`SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, l.Schema)
	for _, tb := range l.Tables() {
		var d string
		// Every column's value, the key under one name whatever the column is
		// called, without the skip-metadata column up adds.
		if err := conn.QueryRow(ctx, `SELECT count(*)::text || ':' || coalesce(md5(string_agg(j::text, E'\n' ORDER BY j::text)), '')
FROM (SELECT (to_jsonb(t) - 'concurrency_skip' - 'concurrency_key' - 'unique_key')
             || jsonb_build_object('key', coalesce(to_jsonb(t)->'unique_key', to_jsonb(t)->'concurrency_key')) AS j FROM `+l.Table(tb)+` t) r`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		s.digest[tb] = d
	}
	return s
}

func (s snapshot) diff(o snapshot) string {
	var b strings.Builder
	cmp := func(what string, a, c []string) {
		in := func(x string, xs []string) bool { return slices.Contains(xs, x) }
		for _, x := range a {
			if !in(x, c) {
				fmt.Fprintf(&b, "%s: lost %s\n", what, x)
			}
		}
		for _, x := range c {
			if !in(x, a) {
				fmt.Fprintf(&b, "%s: gained %s\n", what, x)
			}
		}
	}
	cmp("indexes", s.indexes, o.indexes)
	cmp("constraints", s.constraints, o.constraints)
	cmp("columns", s.columns, o.columns)
	cmp("tables", s.tables, o.tables)
	for k, v := range s.digest {
		if o.digest[k] != v {
			fmt.Fprintf(&b, "rows of %s differ: %s vs %s\n", k, v, o.digest[k])
		}
	}
	return b.String()
}

// contains reports whether s contains every one of parts.
func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// upHeldAtFirstStep starts an up on raw that holds its run lock at its first
// step until finish is called; finish lets it go on and returns its error.
func upHeldAtFirstStep(t *testing.T, url string, raw layout.Layout) (finish func() error) {
	t.Helper()
	inside := make(chan struct{})
	proceed := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := migrations.Up(context.Background(), url, raw, migrations.Options{OnStep: func(r migrations.StepResult) {
			if r.Number == 1 {
				close(inside)
				<-proceed
			}
		}})
		done <- err
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("the held up ended before its first step: %v", err)
	}
	return func() error {
		close(proceed)
		return <-done
	}
}
