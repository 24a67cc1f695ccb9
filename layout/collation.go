package layout

import "strings"

// CollationSQL returns a SQL expression that describes how text in the
// collation whose oid is oidExpr really orders: "provider:locale", with
// ":nondeterministic" appended for a nondeterministic collation, and the
// database's provider and locale for the default collation (an ICU database
// default is not bytewise whatever datcollate says). Providers are c
// (libc), i (ICU) and b (builtin). The catalogs' provider and locale
// columns are read through to_jsonb, so one text serves PostgreSQL 12 to
// 17, whose catalogs name them differently. NULL for oid 0.
func CollationSQL(oidExpr string) string {
	return `(SELECT concat_ws(':', coalesce(cj->>'collprovider', 'c'), coalesce(cj->>'colliculocale', cj->>'colllocale', cj->>'collcollate'),
        CASE WHEN (cj->>'collisdeterministic') = 'false' THEN 'nondeterministic' END)
    FROM (SELECT CASE WHEN co.collname = 'default' THEN (
                 SELECT jsonb_build_object('collprovider', CASE WHEN (dj->>'datlocprovider') = ANY ('{i,b}') THEN dj->>'datlocprovider' ELSE 'c' END,
                                           'colliculocale', coalesce(dj->>'daticulocale', dj->>'datlocale'), 'collcollate', dj->>'datcollate')
                 FROM (SELECT to_jsonb(d) AS dj FROM pg_database d WHERE d.datname = current_database()) db)
             ELSE to_jsonb(co) END AS cj
          FROM pg_collation co WHERE co.oid = ` + oidExpr + `) coll)`
}

// Ordering reads a collation as CollationSQL describes it (a bare locale
// is libc's) and says whether text sorts bytewise in it and whether its
// equality is byte equality. libc's C and POSIX and C.UTF-8 (code point
// order, which is byte order in UTF-8) sort bytewise, and so do the
// builtin provider's C and C.UTF-8; ICU never does.
func Ordering(coll string) (bytewise, deterministic bool) {
	provider, locale, ok := strings.Cut(coll, ":")
	if !ok {
		provider, locale = "c", coll
	}
	locale, nondet, _ := strings.Cut(locale, ":")
	deterministic = nondet != "nondeterministic"
	switch provider {
	case "c", "b":
		bytewise = locale == "C" || locale == "POSIX" || strings.HasPrefix(locale, "C.")
	}
	return bytewise && deterministic, deterministic
}
