package groupstatus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
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

// tableCount is two statements that count the same jobs of one table.
type tableCount struct {
	// probe counts each group with an index probe on its class (and
	// key), with $1 the classes and $2 the keys ("" for the whole class)
	// of the groups, one count per group in their order: its cost follows
	// the listed groups' jobs, with a per-group overhead.
	probe string
	// aggregate counts the jobs of the classes $1 (each once) in one pass,
	// one row (class, key, count as text) per class and key: its cost follows the
	// listed classes' jobs, without a per-group overhead. CountEach sums
	// a class's rows for its keyless group.
	aggregate string
}

// probeGroups is the most groups CountAll counts with per-group index
// probes; more are counted in one aggregate pass over their classes.
const probeGroups = 64

// NewCounter returns nil and says why when the queue's tables cannot be
// counted (missing, or without a key column).
func NewCounter(ctx context.Context, conn pgurl.Handle, l layout.Resolved) (*Counter, string) {
	keyOf := func(table string) (string, error) {
		var key *string
		err := conn.QueryRow(ctx, `SELECT (SELECT a.attname::pg_catalog.text FROM pg_catalog.pg_attribute a
  WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid AND a.attname OPERATOR(pg_catalog.=) ANY (ARRAY[$3, $4]::pg_catalog.name[]) AND NOT a.attisdropped
  ORDER BY a.attname OPERATOR(pg_catalog.=) $3::pg_catalog.name DESC LIMIT 1)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.name AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.name
  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog."char"[])`,
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
			aggregate: `SELECT ` + class + `::pg_catalog.text, ` + layout.Ident(key) + `::pg_catalog.text, pg_catalog.count(*)::pg_catalog.text
FROM ` + l.Table(table) + ` WHERE ` + class + ` OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])` + extra + ` GROUP BY 1, 2`,
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
func (qc *Counter) CountAll(ctx context.Context, conn pgurl.Handle, groups []Group) ([]Counts, error) {
	classes, keys := make([]string, len(groups)), make([]string, len(groups))
	for i, g := range groups {
		classes[i], keys[i] = g.Class, g.Key
	}
	return qc.CountEach(ctx, conn, classes, keys)
}

// CountEach is CountAll for the groups of classes[i] and keys[i] ("" for
// the whole class).
func (qc *Counter) CountEach(ctx context.Context, conn pgurl.Handle, classes, keys []string) ([]Counts, error) {
	if len(classes) != len(keys) {
		return nil, fmt.Errorf("count: %d classes and %d keys", len(classes), len(keys))
	}
	out := make([]Counts, len(classes))
	if len(classes) == 0 {
		return out, nil
	}
	aggregate := len(classes) > probeGroups
	var distinct []string
	if aggregate {
		seen := map[string]bool{}
		for _, c := range classes {
			if !seen[c] {
				seen[c] = true
				distinct = append(distinct, c)
			}
		}
	}
	for _, c := range []struct {
		tc    *tableCount
		field func(*Counts) *int64
	}{{qc.queued, func(c *Counts) *int64 { return &c.Queued }}, {qc.running, func(c *Counts) *int64 { return &c.Running }}} {
		if c.tc == nil {
			continue
		}
		var err error
		if aggregate {
			err = countAggregate(ctx, conn, c.tc.aggregate, distinct, classes, keys, out, c.field)
		} else {
			err = countProbes(ctx, conn, c.tc.probe, classes, keys, out, c.field)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// countProbes runs the probe statement: one count per group, in order.
func countProbes(ctx context.Context, conn pgurl.Handle, sql string, classes, keys []string, out []Counts, field func(*Counts) *int64) error {
	rows, err := conn.Query(ctx, sql, classes, keys)
	if err != nil {
		return err
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		if i >= len(out) {
			return fmt.Errorf("the count returned more rows than the %d groups", len(out))
		}
		if err := rows.Scan(field(&out[i])); err != nil {
			return err
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(out) {
		return fmt.Errorf("the count returned %d rows for %d groups", i, len(out))
	}
	return nil
}

// countAggregate runs the aggregate statement over the distinct classes
// and gives each group its count: a keyed group its class and key's row
// (compared as bytes: a deterministic collation's equality), a keyless one
// the sum of its class's rows (a NULL key's too). The rows are read raw
// (text is its bytes in either format; the count is sent as text), so
// that 10,000 rows cost no allocation each.
func countAggregate(ctx context.Context, conn pgurl.Handle, sql string, distinct, classes, keys []string, out []Counts, field func(*Counts) *int64) error {
	type classGroups struct {
		whole int            // the first keyless group of the class, or -1
		keys  map[string]int // the first group of each key
	}
	byClass := make(map[string]*classGroups, len(distinct))
	next := make([]int, len(out)) // the next group of the same class and key, or -1
	for i := len(out) - 1; i >= 0; i-- {
		cg := byClass[classes[i]]
		if cg == nil {
			cg = &classGroups{whole: -1, keys: map[string]int{}}
			byClass[classes[i]] = cg
		}
		if keys[i] == "" {
			next[i], cg.whole = cg.whole, i
		} else if j, ok := cg.keys[keys[i]]; ok {
			next[i], cg.keys[keys[i]] = j, i
		} else {
			next[i], cg.keys[keys[i]] = -1, i
		}
	}
	add := func(first int, n int64) {
		for i := first; i >= 0; i = next[i] {
			*field(&out[i]) += n
		}
	}
	rows, err := conn.Query(ctx, sql, distinct)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 3 {
			return fmt.Errorf("the count returned %d columns, want 3", len(raw))
		}
		n, err := strconv.ParseInt(string(raw[2]), 10, 64)
		if err != nil {
			return fmt.Errorf("the count returned %q: %w", raw[2], err)
		}
		cg := byClass[string(raw[0])]
		if cg == nil {
			continue
		}
		add(cg.whole, n)
		if len(raw[1]) > 0 { // neither NULL nor ''
			if first, ok := cg.keys[string(raw[1])]; ok {
				add(first, n)
			}
		}
	}
	return rows.Err()
}
