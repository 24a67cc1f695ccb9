package qualify

import (
	"strings"
	"testing"
)

func TestSQL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT pg_advisory_xact_lock($1)", "SELECT pg_catalog.pg_advisory_xact_lock($1)"},
		{"SELECT count(*) FROM t WHERE a = $1::text AND b <> ''", "SELECT pg_catalog.count(*) FROM t WHERE a OPERATOR(pg_catalog.=) $1::pg_catalog.text AND b OPERATOR(pg_catalog.<>) ''"},
		{"SELECT t.* FROM \"s\".\"t\" AS g(id, m) WHERE x = ANY ($1::bigint[])", "SELECT t.* FROM \"s\".\"t\" AS g(id, m) WHERE x OPERATOR(pg_catalog.=) ANY ($1::bigint[])"},
		{"UPDATE \"s\".\"t\" SET a = $1, b = now() WHERE c = $2 RETURNING a || b", "UPDATE \"s\".\"t\" SET a = $1, b = pg_catalog.now() WHERE c OPERATOR(pg_catalog.=) $2 RETURNING a OPERATOR(pg_catalog.||) b"},
		{"SELECT pg_catalog.now(), x OPERATOR(public.=) y, 'a=b', \"c=d\", $q$ x = y $q$, E'\\'='", "SELECT pg_catalog.now(), x OPERATOR(public.=) y, 'a=b', \"c=d\", $q$ x = y $q$, E'\\'='"},
		{"SELECT CASE WHEN a = 1 THEN b + c ELSE -1 END, x::\"char\", y::double precision, z::timestamp with time zone", "SELECT CASE WHEN a OPERATOR(pg_catalog.=) 1 THEN b OPERATOR(pg_catalog.+) c ELSE OPERATOR(pg_catalog.-) 1 END, x::pg_catalog.\"char\", y::double precision, z::timestamp with time zone"},
		{"SELECT * FROM unnest($1::text::bigint[], $2::text[]) AS g(id, m), unnest(x) y", "SELECT * FROM unnest($1::pg_catalog.text::bigint[], $2::pg_catalog.text[]) AS g(id, m), pg_catalog.unnest(x) y"},
		{"WITH c AS (SELECT 1), f(i, adm) AS (SELECT count(*) AS n) SELECT 1", "WITH c AS (SELECT 1), f(i, adm) AS (SELECT pg_catalog.count(*) AS n) SELECT 1"},
		{"SELECT a = (b + 1) -- c = d\n", "SELECT a OPERATOR(pg_catalog.=) (b OPERATOR(pg_catalog.+) 1) -- c = d\n"},
		{"INSERT INTO \"s\".\"t\" AS o (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = EXCLUDED.a WHERE o.a <> EXCLUDED.a", "INSERT INTO \"s\".\"t\" AS o (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = EXCLUDED.a WHERE o.a OPERATOR(pg_catalog.<>) EXCLUDED.a"},
		{"SELECT x COLLATE \"C\" >= $1 AND i.indkey[0] = 1", "SELECT x COLLATE \"C\" OPERATOR(pg_catalog.>=) $1 AND i.indkey[0] OPERATOR(pg_catalog.=) 1"},
	} {
		got, err := SQL(tc.in)
		if err != nil {
			t.Errorf("SQL(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("SQL(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestSQLRefuses(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"SELECT a FROM t WHERE a IN (1, 2)", "IN (...)"},
		{"SELECT nullif(a, '')", "NULLIF"},
		{"SELECT CASE a WHEN 'x' THEN 1 END", "simple CASE"},
		{"SELECT a = b + 1", "different precedence"},
		{"SELECT a BETWEEN 1 AND 2", "BETWEEN"},
		{"SELECT a LIKE 'x%'", "LIKE"},
		{"SELECT a IS DISTINCT FROM b", "DISTINCT FROM"},
		{"SELECT timestamptz '2020-01-01'", "typed literal"},
		{"SELECT 'x", "unterminated"},
	} {
		_, err := SQL(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("SQL(%q) = %v; want an error saying %q", tc.in, err, tc.says)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{
		"SELECT pg_catalog.count(*) FROM \"s\".\"t\" WHERE a OPERATOR(pg_catalog.=) $1::pg_catalog.text",
		"SELECT x FROM t WHERE k OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog.\"char\"[]) AND EXISTS (SELECT 1) ORDER BY 1",
		"begin",
		"INSERT INTO \"s\".\"t\" AS o (a) VALUES ($1) ON CONFLICT (a) DO NOTHING",
		"SELECT g.n FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[])) WITH ORDINALITY AS g (k, n) WHERE EXISTS (SELECT 1) AND NOT (true)",
		"SELECT DISTINCT (a) FROM t GROUP BY (a) ORDER BY (a)",
	} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v, want nil", ok, err)
		}
	}
	for _, tc := range []struct{ in, says string }{
		{"SELECT 1 FROM t WHERE a = $1", "a ="},
		{"SELECT pg_catalog.count(*) FROM t WHERE a OPERATOR(pg_catalog.=) $1 AND b > 4", "b >"},
		{"SELECT now()", "now("},
		{"SELECT $1::text", "::text"},
		{"SELECT 1 WHERE a IN ('r', 'p')", "IN (...)"},
		{"SELECT count (*) FROM t", "count (...)"},
		{"SELECT x FROM t WHERE EXISTS (SELECT now ())", "now (...)"},
	} {
		err := Check(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Check(%q) = %v; want an error quoting %q", tc.in, err, tc.says)
		}
	}
}
