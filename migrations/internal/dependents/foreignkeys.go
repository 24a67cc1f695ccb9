package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// foreignKeysCheck refuses over a foreign key that references the queue
// through a unique rule up drops: PostgreSQL refuses to drop the rule while
// the foreign key needs it, so the cutover could never commit. A foreign
// key from the key column to another table is stored by column number and
// carried.
var foreignKeysCheck = Check{Kind: "foreign keys", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	return query(ctx, q, t, `WITH `+queueColumns+`, `+droppedUnique+`
SELECT true, format('%s', `+quoted("con.conname")+`), format('%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`), pg_get_constraintdef(con.oid), format('%s.%s', `+quoted("dn.nspname")+`, `+quoted("di.relname")+`)
FROM pg_constraint con JOIN dropped ON dropped.idx = con.conindid AND con.contype = 'f' AND $4
JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class di ON di.oid = dropped.idx JOIN pg_namespace dn ON dn.oid = di.relnamespace
UNION ALL
SELECT false, format('%s', `+quoted("con.conname")+`), format('%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`), pg_get_constraintdef(con.oid), ''
FROM pg_constraint con JOIN queue ON queue.rel = con.conrelid AND queue.key = ANY (con.conkey) AND con.contype = 'f' AND $5
JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY 1 DESC, 3, 2`, func(rows pgx.Rows) (Finding, error) {
		var refused bool
		var name, table, def, index string
		if err := rows.Scan(&refused, &name, &table, &def, &index); err != nil {
			return Finding{}, err
		}
		object := safe(table) + " " + safe(name)
		if !refused {
			return carried(t, "foreign key", object, "("+safe(def)+") starts from the key column"), nil
		}
		return Finding{Kind: "foreign key", Object: object, Outcome: Refused,
			Message: fmt.Sprintf("foreign key %s on %s (%s) references the queue's key through the unique rule %s, which up drops: PostgreSQL refuses to drop it while the foreign key needs it, so the cutover could never finish, and once the key is not unique no foreign key can reference it. "+
				"Drop the foreign key before up (ALTER TABLE %s DROP CONSTRAINT %s), or make it reference the primary key",
				safe(name), safe(table), safe(def), safe(index), safe(table), safe(name))}, nil
	}, t.Up, t.Rename != "")
}}
