package testdb

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Shadows is a hostile neighbour planted in a test database: a separate
// low-privilege role with CREATE on public (the ACL PostgreSQL 14 and older
// give every role, which pg_upgrade keeps) created functions and operators
// there that log each call in public.shadow_log and then return
// pg_catalog's answer. Some match the tool's and the runtime's calls better
// than pg_catalog's own and win on the default search path; others are
// exact copies and win where public comes before pg_catalog.
type Shadows struct {
	url  string
	Role string
}

const shadowsSQL = `
CREATE TABLE public.shadow_log (fn text NOT NULL, caller text NOT NULL DEFAULT current_user, at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON public.shadow_log TO PUBLIC;
CREATE FUNCTION public.shadow_hit(fn text) RETURNS void LANGUAGE sql AS $$ INSERT INTO public.shadow_log (fn) VALUES (fn) $$;

-- Better-matching overloads: they win on the default search path.
CREATE FUNCTION public.generate_series(integer, smallint) RETURNS SETOF integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('generate_series(integer, smallint)'); RETURN QUERY SELECT pg_catalog.generate_series($1, $2::integer); END $$;
CREATE FUNCTION public.pg_try_advisory_lock(text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('pg_try_advisory_lock(text)'); RETURN pg_catalog.pg_try_advisory_lock($1::bigint); END $$;
CREATE FUNCTION public.pg_advisory_xact_lock(text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('pg_advisory_xact_lock(text)'); PERFORM pg_catalog.pg_advisory_xact_lock($1::bigint); END $$;
CREATE FUNCTION public.pg_advisory_xact_lock_shared(text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('pg_advisory_xact_lock_shared(text)'); PERFORM pg_catalog.pg_advisory_xact_lock_shared($1::bigint); END $$;
CREATE FUNCTION public.format(text, regclass) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('format(text, regclass)'); RETURN pg_catalog.format($1, $2); END $$;
CREATE FUNCTION public.format(text, regclass, text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('format(text, regclass, text, text)'); RETURN pg_catalog.format($1, $2, $3, $4); END $$;
CREATE FUNCTION public.format(text, regclass, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('format(text, regclass, text)'); RETURN pg_catalog.format($1, $2, $3); END $$;
CREATE FUNCTION public.jsonb_build_object(text, text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('jsonb_build_object(text, text)'); RETURN pg_catalog.jsonb_build_object($1, $2); END $$;
CREATE FUNCTION public.jsonb_build_object(text, bigint, text, text, text, name, text, text, text, boolean, text, boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('jsonb_build_object(...)');
RETURN pg_catalog.jsonb_build_object($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12); END $$;
CREATE FUNCTION public.to_jsonb(text[]) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('to_jsonb(text[])'); RETURN pg_catalog.to_jsonb($1); END $$;
CREATE FUNCTION public.count_step(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('count(bigint)'); RETURN coalesce($1, 0) OPERATOR(pg_catalog.+) 1; END $$;
CREATE AGGREGATE public.count(bigint) (SFUNC = public.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION public.eq_varchar_text(varchar, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('=(varchar, text)'); RETURN $1::text OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = text, FUNCTION = public.eq_varchar_text);
CREATE FUNCTION public.ge_varchar(varchar, varchar) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('>=(varchar, varchar)'); RETURN $1::text OPERATOR(pg_catalog.>=) $2::text; END $$;
CREATE OPERATOR public.>= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.ge_varchar);
CREATE FUNCTION public.le_varchar(varchar, varchar) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('<=(varchar, varchar)'); RETURN $1::text OPERATOR(pg_catalog.<=) $2::text; END $$;
CREATE OPERATOR public.<= (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.le_varchar);
CREATE FUNCTION public.gt_varchar(varchar, varchar) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('>(varchar, varchar)'); RETURN $1::text OPERATOR(pg_catalog.>) $2::text; END $$;
CREATE OPERATOR public.> (LEFTARG = varchar, RIGHTARG = varchar, FUNCTION = public.gt_varchar);

-- Exact copies: they win where public comes before pg_catalog.
CREATE FUNCTION public.eq_int(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('=(integer, integer)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.eq_int);
CREATE FUNCTION public.eq_text(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('=(text, text)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.eq_text);
CREATE FUNCTION public.gt_text(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('>(text, text)'); RETURN $1 OPERATOR(pg_catalog.>) $2; END $$;
CREATE OPERATOR public.> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.gt_text);
CREATE FUNCTION public.ne_text(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('<>(text, text)'); RETURN $1 OPERATOR(pg_catalog.<>) $2; END $$;
CREATE OPERATOR public.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.ne_text);
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.set_config(text, text, boolean) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('set_config(text, text, boolean)'); RETURN pg_catalog.set_config($1, $2, $3); END $$;
CREATE FUNCTION public.current_setting(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('current_setting(text)'); RETURN pg_catalog.current_setting($1); END $$;
CREATE FUNCTION public.pg_advisory_xact_lock(bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('pg_advisory_xact_lock(bigint)'); PERFORM pg_catalog.pg_advisory_xact_lock($1); END $$;
CREATE FUNCTION public.pg_get_indexdef(oid) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('pg_get_indexdef(oid)'); RETURN pg_catalog.pg_get_indexdef($1); END $$;
CREATE FUNCTION public.gen_random_uuid() RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('gen_random_uuid()'); RETURN pg_catalog.gen_random_uuid(); END $$;
CREATE FUNCTION public.split_part(text, text, integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('split_part(text, text, integer)'); RETURN pg_catalog.split_part($1, $2, $3); END $$;
CREATE FUNCTION public.jsonb_array_elements(jsonb) RETURNS SETOF jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.shadow_hit('jsonb_array_elements(jsonb)'); RETURN QUERY SELECT pg_catalog.jsonb_array_elements($1); END $$;
`

var shadowSeq atomic.Int64

// PlantShadows plants the shadows in the database at url, as a new role
// dropped (with what it owns) when the test ends.
func PlantShadows(t TB, url string) *Shadows {
	t.Helper()
	ctx := t.Context()
	conn := Connect(t, url)
	role := fmt.Sprintf("mallory_%d_%d", time.Now().UnixNano(), shadowSeq.Add(1))
	for _, stmt := range []string{
		"CREATE ROLE " + role + " NOLOGIN",
		"GRANT CREATE, USAGE ON SCHEMA public TO " + role,
		"SET ROLE " + role,
		shadowsSQL,
		"RESET ROLE",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("plant the shadows: %v", err)
		}
	}
	t.Cleanup(func() {
		c, err := Dial(context.Background(), url)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP OWNED BY "+role+" CASCADE")
		_, _ = c.Exec(context.Background(), "DROP ROLE "+role)
	})
	s := &Shadows{url: url, Role: role}
	// The control: an unqualified statement runs them, so a test that sees
	// none ran proves something.
	if _, err := conn.Exec(ctx, "SELECT count(x), pg_advisory_xact_lock('42') FROM (VALUES (1::bigint)) v(x)"); err != nil {
		t.Fatalf("the shadows' control statement: %v", err)
	}
	if hits := s.Hits(t); len(hits) < 2 {
		t.Fatalf("the shadows did not run for an unqualified statement (%v): a test on them would prove nothing", hits)
	}
	return s
}

// Hits returns what the shadows logged since the last call ("fn as role"),
// and forgets it.
func (s *Shadows) Hits(t TB) []string {
	t.Helper()
	conn, err := Dial(t.Context(), s.url)
	if err != nil {
		t.Fatalf("read the shadow log: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "DELETE FROM public.shadow_log RETURNING fn || ' as ' || caller")
	if err != nil {
		t.Fatalf("read the shadow log: %v", err)
	}
	hits, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("read the shadow log: %v", err)
	}
	return hits
}

// Check fails the test when any shadow ran since the last call, naming
// what ran it.
func (s *Shadows) Check(t interface {
	TB
	Errorf(format string, args ...any)
}, what string) {
	t.Helper()
	if hits := s.Hits(t); len(hits) > 0 {
		t.Errorf("%s ran another role's objects: %s", what, strings.Join(hits, "; "))
	}
}
