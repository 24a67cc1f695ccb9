package dependents

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// triggerArgumentsCheck refuses over a trigger on a queue table that passes
// the key column's name to its function as an argument (a generic function
// reading the column named in TG_ARGV): the argument is a string PostgreSQL
// does not rewrite, so after the rename the function looks for a column
// that is gone.
var triggerArgumentsCheck = Check{Kind: "trigger arguments", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`
SELECT format('%s on %s.%s', `+quoted("tg.tgname")+`, `+quoted("n.nspname")+`, `+quoted("c.relname")+`),
       encode(tg.tgargs, 'escape')
FROM pg_trigger tg JOIN queue ON queue.rel = tg.tgrelid
JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT tg.tgisinternal AND tg.tgparentid = 0 AND tg.tgnargs > 0
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var trigger, encoded string
		if err := rows.Scan(&trigger, &encoded); err != nil {
			return Finding{}, err
		}
		// tgargs holds each argument NUL-terminated; encode(..., 'escape')
		// writes a NUL as \000.
		if !slices.Contains(strings.Split(encoded, `\000`), t.Column) {
			return Finding{}, nil
		}
		return Finding{Kind: "trigger", Object: safe(trigger), Outcome: Refused,
			Message: fmt.Sprintf("trigger %s passes '%s' to its function as an argument, which PostgreSQL does not rewrite: after %s renames the column to %s, the function looks for a column that is gone. "+
				"Right after %s, create the trigger again passing '%s' (or, before it, make the function try both names)",
				safe(trigger), t.Column, t.direction(), t.Rename, t.direction(), t.Rename)}, nil
	})
}}
