package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// publicationsCheck notes the publications that publish a queue table.
// The rename is carried on this server (column lists and row filters are
// stored by column number or parsed), but subscribers match columns by
// name: their apply stops until their table is renamed too.
var publicationsCheck = Check{Kind: "publications", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" {
		return nil, nil
	}
	// FOR TABLES IN SCHEMA (pg_publication_namespace) exists from 15 on.
	bySchema := `SELECT NULL::oid AS pubid, NULL::oid AS rel WHERE false`
	rows, err := q.Query(ctx, "SELECT to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL")
	if err != nil {
		return nil, err
	}
	var hasNamespaces bool
	for rows.Next() {
		if err := rows.Scan(&hasNamespaces); err != nil {
			rows.Close()
			return nil, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if hasNamespaces {
		bySchema = `SELECT pn.pnpubid, queue.rel FROM pg_publication_namespace pn JOIN pg_class c ON c.relnamespace = pn.pnnspid JOIN queue ON queue.rel = c.oid`
	}
	return query(ctx, q, t, `WITH `+queueColumns+`,
published AS (
    SELECT pr.prpubid AS pubid, queue.rel FROM pg_publication_rel pr JOIN queue ON queue.rel = pr.prrelid
    UNION SELECT p.oid, queue.rel FROM pg_publication p CROSS JOIN queue WHERE p.puballtables
    UNION `+bySchema+`)
SELECT format('%s', `+quoted("p.pubname")+`), string_agg(format('%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`), ', ' ORDER BY c.relname)
FROM published JOIN pg_publication p ON p.oid = published.pubid
JOIN pg_class c ON c.oid = published.rel JOIN pg_namespace n ON n.oid = c.relnamespace
GROUP BY p.pubname ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var pub, tables string
		if err := rows.Scan(&pub, &tables); err != nil {
			return Finding{}, err
		}
		return Finding{Kind: "publication", Object: safe(pub), Outcome: Carried,
			Message: fmt.Sprintf("publication %s publishes %s: carried on this server (its column lists and row filters follow the rename of %s to %s), but a subscriber matches columns by name: its apply stops (\"missing replicated column\") until you run ALTER TABLE ... RENAME COLUMN %s TO %s on the subscriber's table too, right after %s",
				safe(pub), safe(tables), t.Column, t.Rename, t.Column, t.Rename, t.direction())}, nil
	})
}}
