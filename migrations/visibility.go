package migrations

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// sessionVisible is true (pg_stat_activity a) when the server shows the
// connected role the session's transaction start, state and query: to a
// superuser, a member of pg_read_all_stats, or a role with the privileges
// of the session's role. Anyone else reads NULLs there, and
// "<insufficient privilege>" for the query.
const sessionVisible = `(coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user), false)
        OR pg_has_role('pg_read_all_stats', 'USAGE')
        OR (a.usesysid IS NOT NULL AND pg_has_role(a.usesysid, 'USAGE')))`

// hiddenWatch bounds how long the preflight watches, in pg_locks, a session
// whose transaction the connected role cannot see: it refuses when the
// session holds its lock in one transaction for this long (or
// LongTransaction, when shorter), since it cannot tell such a transaction
// from one open for hours.
const hiddenWatch = 5 * time.Second

// checkHidden is the long-transaction check for sessions the connected
// role cannot see in pg_stat_activity (managed servers: no superuser, no
// pg_read_all_stats). pg_locks shows every lock on the queue's tables,
// whatever the role: a client session that holds one in the same
// transaction (pid and virtual transaction) for the whole watch is refused,
// naming it; one whose transaction ends meanwhile passes. The findings say
// what the role cannot see and which grant lets it.
func (r *runner) checkHidden(ctx context.Context, in *inspection, direction string) ([]Finding, error) {
	a := in.access
	if a == nil || a.seesSessions {
		return nil, nil
	}
	watch := min(r.opts.LongTransaction, hiddenWatch)
	var fs []Finding
	fs = append(fs, Finding{Kind: "visibility", Object: a.user, Action: "GRANT pg_read_all_stats TO " + a.user, Message: fmt.Sprintf("role %s cannot see other roles' sessions in pg_stat_activity (when their transactions started, their state and query are hidden from a role without pg_read_all_stats): the long-transaction check reads pg_locks instead, which shows every lock on the queue's tables but not for how long it has been held. A session holding one is watched for up to %s and refused if its transaction lasts that long; for the exact check (refusing only past --long-transaction, %s), an administrator runs: GRANT pg_read_all_stats TO %s",
		a.user, watch, r.opts.LongTransaction, a.user)})
	watched := map[holder]session{}
	for _, s := range in.sessions {
		switch {
		case s.visible:
		case s.role == "":
			fs = append(fs, Finding{Kind: "hidden_session", Object: fmt.Sprintf("pid %d", s.pid), Message: fmt.Sprintf("backend pid %d, a background process (most likely an autovacuum worker), holds %s on %s; role %s cannot tell whether it is an anti-wraparound vacuum, which does not give way to the index builds and the cutover (GRANT pg_read_all_stats TO %s lets it)",
				s.pid, s.mode, r.l.Table(s.table), a.user, a.user)})
		default:
			watched[holder{s.pid, s.vxid}] = s
		}
	}
	if len(watched) == 0 || in.nothingToDo(direction) {
		return fs, nil
	}
	tables := make([]string, 0, len(r.l.Tables()))
	for _, t := range r.l.Tables() {
		tables = append(tables, r.l.Table(t))
	}
	start := time.Now()
	seen := maps.Clone(watched)
	for len(watched) > 0 && time.Since(start) < watch {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(100*time.Millisecond, watch-time.Since(start))):
		}
		rows, err := r.conn.Query(ctx, `SELECT DISTINCT lk.pid, lk.virtualtransaction FROM pg_locks lk
WHERE lk.relation IN (SELECT unnest($1::text[])::regclass) AND lk.pid <> pg_backend_pid() AND `+thisDatabase+``, tables)
		if err != nil {
			return nil, fmt.Errorf("watch the locks on the layout's tables: %w", err)
		}
		still := map[holder]bool{}
		for rows.Next() {
			var h holder
			if err := rows.Scan(&h.pid, &h.vxid); err != nil {
				rows.Close()
				return nil, fmt.Errorf("watch the locks on the layout's tables: %w", err)
			}
			still[h] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("watch the locks on the layout's tables: %w", err)
		}
		for h := range watched {
			if !still[h] {
				delete(watched, h)
			}
		}
	}
	held := time.Since(start).Round(100 * time.Millisecond)
	for _, h := range sortedHolders(seen) {
		if _, ok := watched[h]; !ok {
			s := seen[h]
			fs = append(fs, Finding{Kind: "hidden_session", Object: fmt.Sprintf("pid %d", s.pid), Message: fmt.Sprintf("session pid %d of role %s held %s on %s; its transaction ended while it was watched", s.pid, s.role, s.mode, r.l.Table(s.table))})
		}
	}
	for _, h := range sortedHolders(watched) {
		s := watched[h]
		fs = append(fs, Finding{Fatal: true, Kind: "long_transaction", Object: fmt.Sprintf("pid %d", s.pid), Action: fmt.Sprintf("wait for it or end it: SELECT pg_terminate_backend(%d)", s.pid), Message: fmt.Sprintf("session pid %d of role %s has held %s on %s in one transaction for at least %s (seen in pg_locks; role %s cannot see when the transaction started, its state or its query); it may be hours old, and would stall the index builds and the cutover: wait for it to end or end it (SELECT pg_terminate_backend(%d), as %s, a member of it, or a role with pg_signal_backend), then run again. An administrator who runs GRANT pg_read_all_stats TO %s lets up see its age and refuse only past --long-transaction",
			s.pid, s.role, s.mode, r.l.Table(s.table), held, a.user, s.pid, s.role, a.user)})
	}
	return fs, nil
}

// sortedHolders lists the watched sessions by pid.
func sortedHolders[V any](m map[holder]V) []holder {
	out := make([]holder, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b holder) int { return cmp.Or(a.pid-b.pid, strings.Compare(a.vxid, b.vxid)) })
	return out
}

// holder is a session's transaction as pg_locks names it.
type holder struct {
	pid  int
	vxid string
}

// hiddenLongHolder is longHolder for the sessions the connected role cannot
// see (their xact_start reads NULL): a session whose transaction, by its
// pid and virtual transaction in pg_locks, has held a lock on one of tables
// since an earlier attempt, longer than the first attempt's lock wait, is
// a long holder too. Age is how long the run has seen it, a lower bound.
func (r *runner) hiddenLongHolder(ctx context.Context, tables []string) (*HolderError, error) {
	rows, err := r.conn.Query(ctx, `SELECT lk.pid, lk.virtualtransaction, lk.relation::regclass::text, lk.mode
FROM pg_locks lk JOIN pg_stat_activity a ON a.pid = lk.pid
WHERE lk.granted AND lk.pid <> pg_backend_pid() AND lk.relation IN (SELECT unnest($1::text[])::regclass) AND `+thisDatabase+`
  AND a.usesysid IS NOT NULL AND NOT `+sessionVisible+`
ORDER BY lk.pid`, tables)
	if err != nil {
		return nil, fmt.Errorf("read the lock holders: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	seen := map[holder]time.Time{}
	var long *HolderError
	for rows.Next() {
		var h holder
		var table, mode string
		if err := rows.Scan(&h.pid, &h.vxid, &table, &mode); err != nil {
			return nil, fmt.Errorf("read the lock holders: %w", err)
		}
		first, ok := r.hiddenSeen[h]
		if !ok {
			first = now
		}
		seen[h] = first
		if age := now.Sub(first); age > r.lockWait(1) && (long == nil || age > long.Age) {
			long = &HolderError{PID: h.pid, Table: table, Mode: mode, Age: age, Query: "its start and query are hidden from this role without pg_read_all_stats; held at least this long"}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the lock holders: %w", err)
	}
	r.hiddenSeen = seen
	return long, nil
}
