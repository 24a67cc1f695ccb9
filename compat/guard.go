package compat

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
)

// The admission guard: what the first statement of every admission sets up
// for the statements after it, inside the transaction.
//
// Bounded plans. A count reads each active table in the order of its
// counting index, (class, key), with LIMIT limit (admitText). That plan
// stops after limit index entries, but the planner may still prefer
// another one when its estimates are off: on a connection's first (custom)
// plans, in pgx's exec and simple-protocol modes and through database/sql
// drivers that plan every execution, with statistics older than a burst,
// or for a class that is most of the table. A sequential scan, a bitmap
// scan (which reads every matching entry before the first row) or another
// index plus a sort (a single-column index on the class or the key) all
// read the whole group or class. The guard turns off sequential scans,
// bitmap scans and sorts for the rest of the transaction (set_config with
// is_local), so the only plan left without a penalty is an index scan that
// returns rows already in (class, key) order: the counting index, whose
// required bounds stop the scan at the end of the group. The class is
// matched with = ANY and the key with a closed range, so that neither is an
// equality the planner could use to drop them from the required order (and
// then satisfy it with the single-column index on the key). Every later
// statement of the admission is planned after the guard ran, whatever the
// driver's execution mode, because the server plans a statement only when
// it reaches it.
//
// Isolation. The count must see every job admitted before the group's lock
// was granted, which only READ COMMITTED gives: a REPEATABLE READ or
// SERIALIZABLE snapshot is taken at the transaction's first statement and
// would miss jobs committed while this one waited. The guard fails the
// statement, before anything is inserted, when the transaction runs above
// READ COMMITTED (ErrIsolation).
//
// Lock wait. The guard sets lock_timeout for the transaction before the
// first advisory lock is requested, so an enqueue waits at most that long
// behind a transaction that holds its group's lock (ErrLockTimeout).
//
// In a caller's transaction the guard first saves the settings it changes
// and a last statement restores them, so the caller's own statements after
// the enqueue are planned and time out as before.

// guardedSettings are the planner settings the guard turns off.
var guardedSettings = []string{"enable_seqscan", "enable_bitmapscan", "enable_sort", "enable_incremental_sort"}

// Plans kept. A statement the driver prepares (pgx's default mode, and
// cache_describe) is planned for its parameters on each of its first five
// executions on a connection, and after that for as long as the planner
// estimates the generic plan dearer than the custom ones, which it does for
// the batch statement on every call (its arrays hide the row counts). The
// guard sets plan_cache_mode to force_generic_plan for the transaction, so a
// prepared admission statement is planned once per connection; its generic
// plan is bounded for the same reason as any other (above), which the
// bounded-cost matrix asserts. Unprepared statements (exec, simple
// protocol, most database/sql drivers) are planned on every call either
// way.
const (
	planCacheSetting = "plan_cache_mode"
	planCacheMode    = "force_generic_plan"
)

const (
	// savedSetting keeps a caller's settings while the guard holds them.
	savedSetting = "migrate_unique.saved_settings"
	// isolationMarker names a setting that never exists: reading it is
	// how the guard fails a transaction above READ COMMITTED in plain SQL,
	// and the name in the server's error is how the runtime recognizes it.
	isolationMarker = "migrate_unique.enqueue_needs_read_committed"
)

// DefaultLockWait is how long an enqueue waits for its group's lock by
// default (WithLockWait).
const DefaultLockWait = 5 * time.Second

// ErrIsolation is returned when an enqueue runs in a caller's transaction
// above READ COMMITTED (REPEATABLE READ or SERIALIZABLE). Nothing was
// inserted; the caller's transaction is aborted.
var ErrIsolation = errors.New("the admission check needs a READ COMMITTED transaction")

// ErrLockTimeout is returned when an enqueue waited longer than the client's
// lock wait (WithLockWait) for a group's lock, which another transaction
// holds. Nothing was inserted. `migrate-unique concurrency status GROUP`
// shows the holder.
var ErrLockTimeout = errors.New("timed out waiting for a concurrency group's lock")

// guardExprs returns the guard's target-list entries, evaluated left to
// right before the statement's own: save (in a caller's transaction), the
// isolation check, the lock timeout, the planner settings.
func guardExprs(lockWait time.Duration, save bool) string {
	var b strings.Builder
	if save {
		b.WriteString("set_config('" + savedSetting + "', concat_ws(','")
		for _, name := range guardedSettings {
			b.WriteString(", current_setting('" + name + "')")
		}
		b.WriteString(", current_setting('lock_timeout'), current_setting('" + planCacheSetting + "')), true), ")
	}
	b.WriteString("CASE WHEN current_setting('transaction_isolation') <> 'read committed' THEN current_setting('" + isolationMarker + "') END, ")
	if lockWait > 0 {
		ms := max(lockWait.Milliseconds(), 1)
		b.WriteString("set_config('lock_timeout', '" + strconv.FormatInt(ms, 10) + "ms', true), ")
	}
	for _, name := range guardedSettings {
		b.WriteString("set_config('" + name + "', 'off', true), ")
	}
	b.WriteString("set_config('" + planCacheSetting + "', '" + planCacheMode + "', true)")
	return b.String()
}

// guarded returns q (a SELECT) with the guard's entries first in its target
// list; its arguments are unchanged. The texts are built once per lock
// statement, lock wait and kind of transaction.
func (s *schema) guarded(q query, lockWait time.Duration, inTx bool) query {
	k := guardKey{sql: q.sql, lockWait: lockWait, inTx: inTx}
	s.guardsMu.RLock()
	t, ok := s.guards[k]
	s.guardsMu.RUnlock()
	if !ok {
		t = newStmtText(qualify.Must("SELECT " + guardExprs(lockWait, inTx) + ", " + strings.TrimPrefix(q.sql, "SELECT ")))
		s.guardsMu.Lock()
		if s.guards == nil {
			s.guards = map[guardKey]stmtText{}
		}
		s.guards[k] = t
		s.guardsMu.Unlock()
	}
	q.sql, q.mk = t.sql, t.mk
	return q
}

// guardKey is what a guarded statement's text depends on.
type guardKey struct {
	sql      string
	lockWait time.Duration
	inTx     bool
}

// restoreQuery puts back a caller's settings saved by the guard.
func restoreQuery() query { return restoreText.query() }

var restoreText = newStmtText(func() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, name := range append(append([]string(nil), guardedSettings...), "lock_timeout", planCacheSetting) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("set_config('" + name + "', split_part(v, ',', " + strconv.Itoa(i+1) + "), true)")
	}
	b.WriteString(" FROM (SELECT current_setting('" + savedSetting + "') AS v) s")
	return qualify.Must(b.String())
}())

// isIsolationError reports the guard's isolation failure.
func isIsolationError(err error) bool {
	return err != nil && strings.Contains(err.Error(), isolationMarker)
}

// isLockTimeout reports a lock_timeout error (SQLSTATE 55P03), whichever
// driver reports it.
func isLockTimeout(err error) bool {
	return sqlState(err) == "55P03"
}
