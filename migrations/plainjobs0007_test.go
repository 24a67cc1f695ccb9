package migrations_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// plainShape is what plain-jobs' migrations decide about its three tables:
// every index by name with its definition, every column with its type,
// nullability and default, every constraint by name with its definition.
type plainShape struct {
	indexes, columns, constraints map[string]string
	oids                          map[string]uint32 // index name -> oid
}

func readPlainShape(t *testing.T, conn *pgx.Conn) plainShape {
	t.Helper()
	ctx := t.Context()
	s := plainShape{indexes: map[string]string{}, columns: map[string]string{}, constraints: map[string]string{}, oids: map[string]uint32{}}
	tables := []string{layout.PlainJobsRequests, layout.PlainJobsProcesses, layout.PlainJobsResults}
	read := func(sql string, f func(name, v string, oid uint32)) {
		rows, err := conn.Query(ctx, sql, tables)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		for rows.Next() {
			var name, v string
			var oid uint32
			if err := rows.Scan(&name, &v, &oid); err != nil {
				t.Fatal(err)
			}
			f(name, v, oid)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	read(`SELECT i.relname::text, pg_get_indexdef(x.indexrelid) || CASE WHEN x.indisvalid THEN '' ELSE ' INVALID' END, i.oid
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
WHERE c.relname = ANY ($1) AND c.relnamespace = 'public'::regnamespace`, func(n, v string, oid uint32) { s.indexes[n], s.oids[n] = v, oid })
	read(`SELECT c.relname || '.' || a.attname::text, format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE ' NULL' END
       || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '') || CASE WHEN a.attidentity <> '' THEN ' IDENTITY ' || a.attidentity::text ELSE '' END, 0::oid
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relname = ANY ($1) AND c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped`, func(n, v string, _ uint32) { s.columns[n] = v })
	read(`SELECT c.relname || '.' || k.conname::text, pg_get_constraintdef(k.oid), 0::oid FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relname = ANY ($1) AND c.relnamespace = 'public'::regnamespace`, func(n, v string, _ uint32) { s.constraints[n] = v })
	return s
}

// diffMaps lists what differs between want and got, one line each.
func diffMaps(what string, want, got map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("%s %s: missing (want %s)", what, k, want[k]))
		} else if g != want[k] {
			out = append(out, fmt.Sprintf("%s %s: %s, want %s", what, k, g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s %s: extra (%s)", what, k, got[k]))
		}
	}
	return out
}

// diffFrom0007 lists how got, plain-jobs' tables after up (or the
// golang-migrate files), differs from want, the same tables after plain-jobs'
// own 0007, besides the differences docs/migration.md ("plain-jobs users")
// states, which it checks: priority, retries and retry_attempt stay integer
// (0007: smallint), the results table has the skip-metadata column, and a
// key column that does not sort bytewise (keyCollation) has the two prefix
// indexes.
func diffFrom0007(t *testing.T, want, got plainShape, keyCollation string) []string {
	t.Helper()
	got.columns, got.indexes = maps.Clone(got.columns), maps.Clone(got.indexes)
	want.columns = maps.Clone(want.columns)
	var diffs []string
	for _, tb := range []string{layout.PlainJobsRequests, layout.PlainJobsProcesses, layout.PlainJobsResults} {
		for _, c := range []string{"priority", "retries", "retry_attempt"} {
			k := tb + "." + c
			if want.columns[k] != "smallint NOT NULL" || got.columns[k] != "integer NOT NULL" {
				diffs = append(diffs, fmt.Sprintf("column %s: 0007 %q, up %q; want smallint NOT NULL and integer NOT NULL", k, want.columns[k], got.columns[k]))
			}
			want.columns[k] = got.columns[k]
		}
	}
	if got.columns["plainjobs_jobresult.concurrency_skip"] != "jsonb NULL" {
		diffs = append(diffs, fmt.Sprintf("skip-metadata column: %q, want jsonb NULL", got.columns["plainjobs_jobresult.concurrency_skip"]))
	}
	delete(got.columns, "plainjobs_jobresult.concurrency_skip")
	if bytewise, _ := layout.Ordering(keyCollation); !bytewise {
		for _, n := range []string{"plainjobs_jobrequest_concurrency_key_c_idx", "plainjobs_jobprocess_concurrency_key_c_idx"} {
			if _, ok := got.indexes[n]; !ok {
				diffs = append(diffs, fmt.Sprintf("key column sorts by %s: prefix index %s missing", keyCollation, n))
			}
			delete(got.indexes, n)
		}
	}
	diffs = append(diffs, diffMaps("index", want.indexes, got.indexes)...)
	diffs = append(diffs, diffMaps("column", want.columns, got.columns)...)
	diffs = append(diffs, diffMaps("constraint", want.constraints, got.constraints)...)
	return diffs
}

// plainJobs0007Reference returns plain-jobs' tables after its own 0007,
// applied to a fresh copy of the 0.37 fixture in one transaction, as plain
// runs it, and the key column's collation there.
func plainJobs0007Reference(t *testing.T) (plainShape, string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	ref := testdb.Connect(t, legacyDB(t, legacy.PlainJobs))
	var keyCollation string
	if err := ref.QueryRow(ctx, `SELECT `+layout.CollationSQL("a.attcollation")+` FROM pg_attribute a WHERE a.attrelid = 'plainjobs_jobrequest'::regclass AND a.attname = 'unique_key'`).Scan(&keyCollation); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Exec(ctx, "BEGIN;\n"+legacy.PlainJobs0007+"\nCOMMIT;"); err != nil {
		t.Fatalf("plain-jobs 0007: %v", err)
	}
	return readPlainShape(t, ref), keyCollation, ref
}

// On plain-jobs 0.37.6's real schema (testdata/legacy/plainjobs.sql), up
// ends where plain-jobs 0.38.0's own migration 0007 does
// (testdata/legacy/plainjobs_0007.sql, applied to a copy of the same
// schema and rows in one transaction, as plain runs it): the same indexes
// by name and pg_get_indexdef, the same constraints, the same columns but
// for the two documented differences (priority, retries and retry_attempt
// stay integer where 0007 makes them smallint; the results table carries
// the runtime's skip-metadata column). The key indexes are plain-jobs' own,
// renamed (same oid), not built twice, and no other index is a duplicate.
// plain-jobs' later migrations (0009, 0010) then run on both alike, which
// an index of ours named plainjobs_jobrequest_concurrency_key_idx would
// break. down restores the 0.37 schema and every row.
func TestUpOnPlainJobsEndsWhere0007Does(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := legacy.PlainJobs

	want, keyCollation, ref := plainJobs0007Reference(t)

	url := legacyDB(t, s)
	conn := testdb.Connect(t, url)
	before := readPlainShape(t, conn)
	rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if rep.After != migrations.Migrated {
		t.Fatalf("up ended %s", rep.After)
	}

	got := readPlainShape(t, conn)
	if diffs := diffFrom0007(t, want, got, keyCollation); len(diffs) > 0 {
		t.Errorf("up differs from plain-jobs 0007:\n%s", strings.Join(diffs, "\n"))
	}

	// Renamed, not rebuilt: the 0.37 index is 0007's.
	for old, renamed := range map[string]string{
		"plainjobs_j_unique__67172c_idx": "plainjobs_j_concurr_ad4464_idx",
		"job_class_unique_key":           "job_concurrency_key",
		"plainjobs_j_unique__42f6a6_idx": "plainjobs_j_concurr_c10926_idx",
		"job_request_class_unique_key":   "job_request_concurrency_key",
	} {
		if before.oids[old] == 0 || got.oids[renamed] != before.oids[old] {
			t.Errorf("%s (oid %d) should be the renamed %s (oid %d)", renamed, got.oids[renamed], old, before.oids[old])
		}
	}
	// No duplicate: no two indexes of a table with one definition.
	seen := map[string]string{}
	for name, def := range got.indexes {
		shape := strings.Replace(def, " "+name+" ", " _ ", 1)
		if other, ok := seen[shape]; ok {
			t.Errorf("indexes %s and %s are the same index: %s", name, other, def)
		}
		seen[shape] = name
	}
	for _, n := range []string{"plainjobs_jobrequest_concurrency_key_idx", "plainjobs_jobprocess_concurrency_key_idx"} {
		if _, ok := got.indexes[n]; ok {
			t.Errorf("up left an index named %s, the name plain-jobs 0010 gives to another index", n)
		}
	}

	// plain-jobs goes on with its own migrations, on both alike.
	for name, c := range map[string]*pgx.Conn{"0007": ref, "up": conn} {
		if _, err := c.Exec(ctx, "BEGIN;\n"+legacy.PlainJobs0009And0010+"\nCOMMIT;"); err != nil {
			t.Errorf("plain-jobs 0009 and 0010 after %s: %v", name, err)
			_, _ = c.Exec(ctx, "ROLLBACK")
		}
	}
	after0010, got0010 := readPlainShape(t, ref), readPlainShape(t, conn)
	if d := diffMaps("index", after0010.indexes, got0010.indexes); len(slices.DeleteFunc(d, func(l string) bool { return strings.Contains(l, "_concurrency_key_c_idx") })) > 0 {
		t.Errorf("after plain-jobs 0009 and 0010, up's indexes differ from 0007's:\n%s", strings.Join(d, "\n"))
	}
	// The tool sees plain-jobs' later names as its indexes: no drift, and
	// up again builds nothing.
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil || st.State != migrations.Migrated || len(st.Drift) > 0 {
		t.Errorf("status after plain-jobs 0010: %+v %v; want migrated without drift", st, err)
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Errorf("up after plain-jobs 0010: %v", err)
	}
	if d := diffMaps("index", got0010.indexes, readPlainShape(t, conn).indexes); len(d) > 0 {
		t.Errorf("up after plain-jobs 0010 changed the indexes:\n%s", strings.Join(d, "\n"))
	}
	if _, err := ref.Exec(ctx, "BEGIN;\n"+legacy.PlainJobs0009And0010+"\nCOMMIT;"); err == nil {
		t.Error("running plain-jobs 0010 twice succeeded: the test cannot see a rename that fails")
	}
	_, _ = ref.Exec(ctx, "ROLLBACK")
}

// down after up restores plain-jobs 0.37.6's schema exactly (every index,
// constraint and column, nullability and defaults included) and every row.
func TestDownRestoresPlainJobs037(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	conn := testdb.Connect(t, url)
	before, beforeSnap := readPlainShape(t, conn), takeSnapshot(t, url, s.Layout)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up: %v", err)
	}
	rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{})
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	if rep.After != migrations.Legacy {
		t.Errorf("down ended %s, want legacy", rep.After)
	}
	after := readPlainShape(t, conn)
	var diffs []string
	diffs = append(diffs, diffMaps("index", before.indexes, after.indexes)...)
	diffs = append(diffs, diffMaps("column", before.columns, after.columns)...)
	diffs = append(diffs, diffMaps("constraint", before.constraints, after.constraints)...)
	if len(diffs) > 0 {
		t.Errorf("down did not restore plain-jobs 0.37:\n%s", strings.Join(diffs, "\n"))
	}
	// The renamed key indexes are plain-jobs' own again, never rebuilt.
	for _, n := range []string{"plainjobs_j_unique__67172c_idx", "job_class_unique_key", "plainjobs_j_unique__42f6a6_idx", "job_request_class_unique_key"} {
		if after.oids[n] != before.oids[n] {
			t.Errorf("%s: oid %d, was %d: rebuilt instead of renamed back", n, after.oids[n], before.oids[n])
		}
	}
	if d := beforeSnap.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Errorf("down did not restore every row and object:\n%s", d)
	}
}
