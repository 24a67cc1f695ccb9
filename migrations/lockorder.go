package migrations

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

// The order in which a step takes its exclusive locks (docs/migration.md
// "The application is never the deadlock victim").
//
// A step that holds table X and waits for table Y closes a cycle with an
// application transaction that holds Y and waits for X: the step gives way
// (laterLockWait), but it cannot get its locks as long as the application
// keeps taking Y before X. So the step takes the tables in the order the
// application takes them: first an order read from plain-jobs' own source,
// then the order it learns from pg_locks whenever a later lock times out
// (the sessions that hold the table it waited for, and the table of the
// step's each of them waits for).

// cutoverLockOrder is the order the cutover (and the cutover back) takes the
// queue's tables in: the order in which plain-jobs' transactions first touch
// them (github.com/dropseed/plain, plain-jobs 0.37.6, commit 253bf8e9:
// plain-jobs/plain/jobs/workers.py Worker.run with models.py
// JobRequest.convert_to_job_process takes the requests, then the processes;
// models.py JobProcess.convert_to_result the results, then the processes;
// JobResult.retry_job the requests, then the results). Holding the requests
// and the results, the cutover waits for the processes only behind
// transactions that need neither. Other layouts keep their tables' order.
func cutoverLockOrder(l layout.Resolved) []string {
	ts := l.Tables()
	if l.SingleTable() || l.ResultsTable == "" || len(ts) != 3 {
		return quoteTables(l, ts)
	}
	return quoteTables(l, []string{l.RequestsTable, l.ResultsTable, l.ProcessesTable})
}

func quoteTables(l layout.Resolved, ts []string) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = l.Table(t)
	}
	return out
}

// lockEdge says the application was seen taking table before after: a
// session held before while it waited for after, held by the step.
type lockEdge struct{ before, after string }

// LockHolder is a session that held a table a step waited for, when the wait
// ended.
type LockHolder struct {
	PID int
	// ApplicationName is the session's application_name.
	ApplicationName string
	// Table is the table the step waited for, Mode the lock the session
	// held on it.
	Table, Mode string
	// WaitsFor is a table the step held that the session was waiting for
	// ("" when it was not waiting for the step): the application takes
	// Table before WaitsFor.
	WaitsFor string
	// Query is the start of its current or last statement.
	Query string
}

func (b LockHolder) String() string {
	s := fmt.Sprintf("pid %d (application_name %q) holding %s on %s", b.PID, b.ApplicationName, b.Mode, b.Table)
	if b.WaitsFor != "" {
		s += " while waiting for " + b.WaitsFor + " (held by this step)"
	}
	return s + fmt.Sprintf(", statement %q", b.Query)
}

func blockersString(bs []LockHolder) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = b.String()
	}
	return strings.Join(parts, "; ")
}

// lockOrder is the order step s takes its exclusive locks in this attempt:
// s.exclusive, with a table moved before an earlier one whenever the
// application was seen taking it first more often than the other way round
// (passes until none moves, bounded, so that a cycle in what was seen ends
// in some order rather than none).
func (r *runner) lockOrder(s step) []string {
	order := slices.Clone(s.exclusive)
	if len(r.lockEdges) == 0 {
		return order
	}
	for range len(order) * len(order) {
		moved := false
		for i := 0; i < len(order) && !moved; i++ {
			for j := i + 1; j < len(order); j++ {
				a, b := order[i], order[j]
				if r.lockEdges[lockEdge{b, a}] > r.lockEdges[lockEdge{a, b}] {
					order = slices.Insert(slices.Delete(order, j, j+1), i, b)
					moved = true
					break
				}
			}
		}
		if !moved {
			break
		}
	}
	return order
}

// observeBlockers runs after the step's lock on table timed out, inside
// the step's transaction rolled back to the savepoint before that lock (so
// that it still holds held, the tables it locked before): it reads which
// sessions hold table and which of held each of them waits for, records
// what that says of the application's lock order, and keeps them for the
// step's error should it give up. The step is not waiting for a lock
// meanwhile, so no deadlock check can pick an application session; the
// read is bounded by its own statement timeout.
func (r *runner) observeBlockers(ctx context.Context, tx pgx.Tx, table string, held []string) {
	r.lastBlockers = nil
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT migrate_unique_lock; SET LOCAL statement_timeout = '500ms'"); err != nil {
		return
	}
	rows, err := tx.Query(ctx, `SELECT l.pid, coalesce(a.application_name, ''), l.mode, pg_catalog.left(coalesce(a.query, ''), 120),
       coalesce((SELECT w.relation::pg_catalog.regclass::text FROM pg_catalog.pg_locks w
                 WHERE w.pid OPERATOR(pg_catalog.=) l.pid AND NOT w.granted AND w.locktype OPERATOR(pg_catalog.=) 'relation'
                   AND w.relation OPERATOR(pg_catalog.=) ANY (SELECT pg_catalog.to_regclass(n)::pg_catalog.oid FROM pg_catalog.unnest($2::text[]) n)
                 LIMIT 1), '')
FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
WHERE l.locktype OPERATOR(pg_catalog.=) 'relation' AND l.granted AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
  AND l.relation OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)::pg_catalog.oid
  AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
ORDER BY l.pid LIMIT 20`, table, held)
	if err != nil {
		return
	}
	defer rows.Close()
	// The holder's view of the tables is regclass text under the pinned
	// search_path: schema-qualified, as l.Table quotes them only when
	// needed. Map them back to the step's own names.
	names := map[string]string{}
	for _, h := range held {
		names[unquoteQualified(h)] = h
	}
	for rows.Next() {
		var b LockHolder
		if err := rows.Scan(&b.PID, &b.ApplicationName, &b.Mode, &b.Query, &b.WaitsFor); err != nil {
			return
		}
		b.Table = table
		if b.WaitsFor != "" {
			if n, ok := names[unquoteQualified(b.WaitsFor)]; ok {
				b.WaitsFor = n
			}
			r.lockEdges[lockEdge{table, b.WaitsFor}]++
		}
		r.lastBlockers = append(r.lastBlockers, b)
	}
}

// unquoteQualified drops the double quotes of a qualified name, for
// comparing two spellings of it.
func unquoteQualified(s string) string { return strings.ReplaceAll(s, `"`, "") }

// lockWaitEnded reports the end of a bounded lock wait (lock_timeout, or
// the statement_timeout that bounds the same statement).
func lockWaitEnded(ctx context.Context, err error) bool {
	return ctx.Err() == nil && retryable(err)
}
