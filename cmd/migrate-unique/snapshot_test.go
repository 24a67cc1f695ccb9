package main

import (
	"context"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// dbSnapshot renders everything a command that must change nothing could
// change: every relation, column, index (with its validity) and constraint
// outside the system schemas, every advisory lock and prepared transaction,
// and a digest over every row of every table.
func dbSnapshot(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Connect(t, url)
	defer conn.Close(ctx)
	var b strings.Builder
	rows, err := conn.Query(ctx, `
SELECT 'relation ' || c.oid::regclass::text || ' ' || c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
UNION ALL
SELECT 'column ' || a.attrelid::regclass::text || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index ' || pg_get_indexdef(x.indexrelid) || CASE WHEN x.indisvalid THEN '' ELSE ' INVALID' END
FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
UNION ALL
SELECT 'constraint ' || co.conrelid::regclass::text || ' ' || co.conname || ' ' || pg_get_constraintdef(co.oid)
FROM pg_constraint co JOIN pg_namespace n ON n.oid = co.connamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT 'advisory lock ' || l.classid || '/' || l.objid || ' ' || l.mode FROM pg_locks l WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
		if rel, ok := strings.CutPrefix(l, "relation "); ok && strings.HasSuffix(rel, " r") {
			var d string
			table := strings.TrimSuffix(rel, " r")
			if err := conn.QueryRow(ctx, `SELECT count(*)::text || ':' || coalesce(md5(string_agg(to_jsonb(t)::text, E'\n' ORDER BY to_jsonb(t)::text)), '') FROM `+table+` t`).Scan(&d); err != nil {
				t.Fatal(err)
			}
			b.WriteString("rows " + table + " " + d + "\n")
		}
	}
	return b.String()
}
