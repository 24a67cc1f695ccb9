package groupstatus

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

// Counter counts groups' queued and running jobs in the queue's tables:
// the requests and processes tables of a two-table layout, or the jobs
// table's first active state (queued) and its other active states
// (running) in a single-table one. A keyless group is the whole class.
type Counter struct {
	l layout.Resolved
	// queued and running count in one table each; nil when the layout has
	// no such table.
	queued, running *tableCount
}

// tableCount is two statements that count the same jobs of one table,
// each with $1 the classes and $2 the keys ("" for the whole class) of the
// groups and one count per group in their order.
type tableCount struct {
	// probe counts each group with an index probe on its class (and
	// key): its cost follows the listed groups' jobs, with a per-group
	// overhead.
	probe string
	// aggregate counts the listed classes' jobs in one pass, grouped by
	// class and key, and hash-joins the groups to it: its cost follows
	// the listed classes' jobs, without a per-group overhead.
	aggregate string
}

// probeGroups is the most groups CountAll counts with per-group index
// probes; more are counted in one aggregate pass over their classes.
const probeGroups = 64

// NewCounter returns nil and says why when the queue's tables cannot be
// counted (missing, or without a key column).
func NewCounter(ctx context.Context, conn *pgx.Conn, l layout.Resolved) (*Counter, string) {
	keyOf := func(table string) (string, error) {
		var key *string
		err := conn.QueryRow(ctx, `SELECT (SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ($3, $4) AND NOT a.attisdropped ORDER BY a.attname = $3 DESC LIMIT 1)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
			l.Schema, table, layout.KeyColumn, layout.LegacyKeyColumn).Scan(&key)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return "", fmt.Errorf("table %s does not exist (pass the layout flags of the queue)", l.Table(table))
		case err != nil:
			return "", err
		case key == nil:
			return "", fmt.Errorf("table %s has no %s or %s column", l.Table(table), layout.KeyColumn, layout.LegacyKeyColumn)
		}
		return *key, nil
	}
	// One statement counts every group, each with the index probe of its
	// own class (and key): a keyless group's count and a keyed group's are
	// separate subqueries, so that each is planned on the counting index
	// rather than as a filter over the whole class.
	const groupsFrom = `ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[])) WITH ORDINALITY AS g(class, key, n)`
	stmt := func(table, key, extra string) *tableCount {
		class := layout.Ident(l.ClassColumn)
		count := func(keyCond string) string {
			return `(SELECT pg_catalog.count(*) FROM ` + l.Table(table) + ` WHERE ` + class + ` OPERATOR(pg_catalog.=) g.class` + keyCond + extra + `)`
		}
		return &tableCount{
			probe: `SELECT CASE WHEN g.key OPERATOR(pg_catalog.=) '' THEN ` + count("") +
				` ELSE ` + count(` AND `+layout.Ident(key)+` OPERATOR(pg_catalog.=) g.key`) + ` END
FROM ` + groupsFrom + ` ORDER BY g.n`,
			aggregate: `WITH c AS MATERIALIZED (
    SELECT ` + class + `::pg_catalog.text AS class, ` + layout.Ident(key) + `::pg_catalog.text AS key, pg_catalog.count(*) AS n
    FROM ` + l.Table(table) + ` WHERE ` + class + ` OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])` + extra + ` GROUP BY 1, 2
), per_class AS (SELECT class, pg_catalog.sum(n)::pg_catalog.int8 AS n FROM c GROUP BY class)
SELECT COALESCE(k.n, pc.n, 0) FROM ` + groupsFrom + `
LEFT JOIN c k ON g.key OPERATOR(pg_catalog.<>) '' AND k.class OPERATOR(pg_catalog.=) g.class AND k.key OPERATOR(pg_catalog.=) g.key
LEFT JOIN per_class pc ON g.key OPERATOR(pg_catalog.=) '' AND pc.class OPERATOR(pg_catalog.=) g.class
ORDER BY g.n`,
		}
	}
	qc := &Counter{l: l}
	if l.SingleTable() {
		key, err := keyOf(l.JobsTable)
		if err != nil {
			return nil, err.Error()
		}
		state := layout.Ident(l.StateColumn)
		qc.queued = stmt(l.JobsTable, key, ` AND `+state+` OPERATOR(pg_catalog.=) `+layout.Literal(l.PendingState()))
		qc.running = stmt(l.JobsTable, key, ` AND `+l.StatesCondition()+` AND `+state+` OPERATOR(pg_catalog.<>) `+layout.Literal(l.PendingState()))
		return qc, ""
	}
	for _, t := range []struct {
		name string
		into **tableCount
	}{{l.RequestsTable, &qc.queued}, {l.ProcessesTable, &qc.running}} {
		if t.name == "" {
			continue // a layout without that table: none
		}
		key, err := keyOf(t.name)
		if err != nil {
			return nil, err.Error()
		}
		*t.into = stmt(t.name, key, "")
	}
	return qc, ""
}

// Counts are one group's job counts.
type Counts struct {
	Queued, Running int64
}

// CountAll counts the jobs of every group, in one statement per table:
// one count per group, in the groups' order. Up to probeGroups groups are
// counted with index probes, more in one aggregate pass over their
// classes' jobs.
func (qc *Counter) CountAll(ctx context.Context, conn *pgx.Conn, groups []Group) ([]Counts, error) {
	out := make([]Counts, len(groups))
	if len(groups) == 0 {
		return out, nil
	}
	classes, keys := make([]string, len(groups)), make([]string, len(groups))
	for i, g := range groups {
		classes[i], keys[i] = g.Class, g.Key
	}
	for _, c := range []struct {
		tc    *tableCount
		field func(*Counts) *int64
	}{{qc.queued, func(c *Counts) *int64 { return &c.Queued }}, {qc.running, func(c *Counts) *int64 { return &c.Running }}} {
		if c.tc == nil {
			continue
		}
		sql := c.tc.probe
		if len(groups) > probeGroups {
			sql = c.tc.aggregate
		}
		rows, err := conn.Query(ctx, sql, classes, keys)
		if err != nil {
			return nil, err
		}
		i := 0
		for rows.Next() {
			if i >= len(out) {
				rows.Close()
				return nil, fmt.Errorf("the count returned more rows than the %d groups", len(out))
			}
			if err := rows.Scan(c.field(&out[i])); err != nil {
				rows.Close()
				return nil, err
			}
			i++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
