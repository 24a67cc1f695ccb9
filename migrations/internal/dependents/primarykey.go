package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// primaryKeyCheck refuses over a queue table whose primary key includes the
// key column: the cutover replaces unique rules, never a primary key, so it
// would stay and reject a second job of a group (23505) once the runtime
// admits more than one; and a primary key's columns cannot hold the NULL
// that means "no key".
var primaryKeyCheck = Check{Kind: "primary keys", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if !t.Up || t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`
SELECT format('%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`), coalesce(con.conname::text, i.relname::text), pg_get_indexdef(x.indexrelid)
FROM queue JOIN pg_index x ON x.indrelid = queue.rel AND x.indisprimary AND queue.key = ANY ((x.indkey::int2[])[0:x.indnkeyatts - 1])
JOIN pg_class c ON c.oid = queue.rel JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class i ON i.oid = x.indexrelid AND NOT i.relispartition
LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.contype = 'p'
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var table, name, def string
		if err := rows.Scan(&table, &name, &def); err != nil {
			return Finding{}, err
		}
		return Finding{Kind: "primary key", Object: safe(table) + " " + ident(name), Outcome: Refused,
			Message: fmt.Sprintf("the primary key %s of %s (%s) includes %s: the cutover replaces unique rules, never a primary key, so it would stay and reject a second job of a group (23505) once the runtime admits more than one. "+
				"Give the table a primary key without the key column (a surrogate id) before up",
				ident(name), safe(table), safe(def), t.Column)}, nil
	})
}}
