package migrations

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// down --drain (SPEC section 7, "A rollback that can finish under
// traffic"): on a migrated layout, groups may hold more jobs than the old
// unique rule allows (limits above 1), and down refuses while they do. With
// Options.Drain, Down first sets each such group to limit 1 through an
// override in concurrency_limits (so compat admits no more than the old
// rule would), waits, up to DrainTimeout, for the extra jobs to finish,
// then rolls back. The overrides it replaced are recorded in the version
// table first (column drained), so that whatever stops the run, they are
// put back: by the run itself when it gives up, fails or is interrupted,
// or by the step "restore the overrides" of the next down after a kill.

// drainedGroup is one override down --drain set: the group, and the
// override it replaced (Had false: there was none).
type drainedGroup struct {
	Group  string `json:"group"`
	Had    bool   `json:"had"`
	Limit  int    `json:"limit"`
	Reason string `json:"reason"`
}

// drainReason marks the overrides down --drain sets; restoring deletes
// only rows that still carry it (an operator's later decision stays).
const drainReason = "migrate-unique down --drain: limit 1 until the rollback restores the old unique rule"

// DrainError says that down --drain gave up: after DrainTimeout, groups
// still held more jobs than the old unique rule allows. The overrides it
// set were restored and nothing was rolled back.
type DrainError struct {
	// Waited is how long it waited; Groups the groups left.
	Waited time.Duration
	Groups []DuplicateGroup
}

// Error lists the groups left and says what was restored.
func (e *DrainError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "down --drain gave up after %s (--drain-timeout): %d group(s) still hold more jobs than the old unique rule allows; the limit overrides it set were restored and nothing was rolled back. Let those jobs finish (or raise --drain-timeout) and run down --drain again:", e.Waited.Round(time.Second), len(e.Groups))
	for _, g := range e.Groups {
		fmt.Fprintf(&b, "\n  - %s: class %q, key %q: %d jobs", g.Table, g.Class, g.Key, g.Count)
	}
	return b.String()
}

func extraJobs(groups []DuplicateGroup) int64 {
	var n int64
	for _, g := range groups {
		n += g.Count - 1
	}
	return n
}

// drain sets limit 1 on every group the saved unique rules would not
// allow and waits for their extra jobs to finish; each scan while it waits
// limits the groups that went over the rule since. On any error it has
// restored what it set. It returns the groups it set (nil: nothing to
// drain).
func (r *runner) drain(ctx context.Context, in *inspection) ([]drainedGroup, error) {
	if in.version == nil || len(in.version.saved) == 0 {
		r.printf("drain: no unique rule to restore; nothing to drain\n")
		return nil, nil
	}
	groups, err := scanDuplicates(ctx, r.conn, r.l, in.version.saved)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		r.printf("drain: every group fits the old unique rule; nothing to drain\n")
		return nil, nil
	}
	if !in.runtime[layout.LimitsTable] {
		return nil, fmt.Errorf("down --drain sets limit overrides in %s, which does not exist: create it with up (it repairs the drift), or let the extra jobs finish and run down", r.l.Table(layout.LimitsTable))
	}
	names := map[string]bool{}
	for _, g := range groups {
		names[layout.GroupName(g.Class, g.Key)] = true
	}
	set, err := r.setDrainOverrides(ctx, in, names)
	if err != nil {
		return nil, err
	}
	restore := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgurl.CancelWait)
		defer cancel()
		if err := r.restoreDrained(rctx, set); err != nil {
			r.printf("drain: could not restore the overrides it set (%v); the next down restores them\n", err)
		} else {
			r.printf("drain: restored the limit overrides of %d group(s)\n", len(set))
		}
	}
	start := time.Now()
	first := extraJobs(groups)
	r.printf("drain: %d group(s) hold %d more job(s) than the old unique rule allows; set them to limit 1 (overrides in %s) and waiting up to %s for the extra jobs to finish\n",
		len(groups), first, r.l.Table(layout.LimitsTable), r.opts.DrainTimeout)
	lastExtra, lastPrint := first, time.Now()
	for {
		select {
		case <-ctx.Done():
			restore()
			return nil, fmt.Errorf("down --drain interrupted while waiting for %d extra job(s): %w", lastExtra, ctx.Err())
		case <-time.After(r.opts.DrainPoll):
		}
		if groups, err = scanDuplicates(ctx, r.conn, r.l, in.version.saved); err != nil {
			restore()
			return nil, err
		}
		// Groups that went over the old rule since (new keys, or a
		// group at one job that took a second before its override): they
		// are limited too, recorded with the rest.
		added := map[string]bool{}
		for _, g := range groups {
			if name := layout.GroupName(g.Class, g.Key); !names[name] {
				added[name] = true
			}
		}
		if len(added) > 0 {
			in.version.drained = set
			more, err := r.setDrainOverrides(ctx, in, added)
			if err != nil {
				restore()
				return nil, err
			}
			set = more
			for name := range added {
				names[name] = true
			}
			r.printf("drain: %d more group(s) went over the old unique rule since the drain began; set them to limit 1 too (%d in all)\n", len(added), len(names))
		}
		extra := extraJobs(groups)
		if len(groups) == 0 {
			r.printf("drain: done in %s: every group fits the old unique rule\n", time.Since(start).Round(time.Millisecond))
			return set, nil
		}
		if time.Since(start) >= r.opts.DrainTimeout {
			restore()
			return nil, &DrainError{Waited: time.Since(start), Groups: groups}
		}
		if extra != lastExtra || time.Since(lastPrint) >= r.opts.ProgressEvery {
			r.printf("drain: %d group(s), %d extra job(s) left (%d finished), %s of %s\n", len(groups), extra, first-extra, time.Since(start).Round(time.Second), r.opts.DrainTimeout)
			lastExtra, lastPrint = extra, time.Now()
		}
	}
}

// setDrainOverrides records the overrides it replaces in the version
// table, then sets limit 1 on every group, in one transaction. Groups a
// stopped drain set already keep the override recorded then.
func (r *runner) setDrainOverrides(ctx context.Context, in *inspection, names map[string]bool) ([]drainedGroup, error) {
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	recorded := map[string]drainedGroup{}
	for _, d := range in.version.drained {
		recorded[d.Group] = d
	}
	limits := r.l.Table(layout.LimitsTable)
	var set []drainedGroup
	err := r.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", r.opts.LockTimeout.Milliseconds())); err != nil {
			return err
		}
		for _, g := range sorted {
			d, ok := recorded[g]
			if !ok {
				d = drainedGroup{Group: g}
				err := tx.QueryRow(ctx, "SELECT concurrency_limit, reason FROM "+limits+" WHERE group_name OPERATOR(pg_catalog.=) $1::pg_catalog.text", g).Scan(&d.Limit, &d.Reason)
				switch {
				case err == nil:
					d.Had = true
				case err != pgx.ErrNoRows:
					return fmt.Errorf("read the override of group %q: %w", g, err)
				}
			}
			set = append(set, d)
		}
		for _, d := range in.version.drained {
			if !names[d.Group] {
				set = append(set, d) // a stopped drain's, still to restore
			}
		}
		js, err := json.Marshal(set)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE "+r.l.Table(layout.VersionTable)+" ADD COLUMN IF NOT EXISTS drained jsonb NULL"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE "+r.l.Table(layout.VersionTable)+" SET drained = $1::pg_catalog.jsonb, updated_at = pg_catalog.now() WHERE layout OPERATOR(pg_catalog.=) $2::pg_catalog.text", string(js), layoutID(r.l)); err != nil {
			return err
		}
		for _, g := range sorted {
			if _, err := tx.Exec(ctx, "INSERT INTO "+limits+` AS o (group_name, concurrency_limit, reason, updated_at) VALUES ($1::pg_catalog.text, 1, $2::pg_catalog.text, pg_catalog.now())
ON CONFLICT (group_name) DO UPDATE SET concurrency_limit = 1, reason = EXCLUDED.reason, updated_at = EXCLUDED.updated_at`, g, drainReason); err != nil {
				return fmt.Errorf("set the override of group %q: %w", g, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("down --drain: set limit 1 on the groups the old unique rule would not allow: %w", err)
	}
	return set, nil
}

// restoreSQL puts back the overrides a drain replaced and forgets them in
// the version table.
func restoreSQL(l layout.Resolved, set []drainedGroup) string {
	var b strings.Builder
	limits := l.Table(layout.LimitsTable)
	for _, d := range set {
		if d.Had {
			fmt.Fprintf(&b, "UPDATE %s SET concurrency_limit = %d, reason = %s, updated_at = pg_catalog.now() WHERE group_name = %s AND reason = %s;\n",
				limits, d.Limit, layout.Literal(d.Reason), layout.Literal(d.Group), layout.Literal(drainReason))
		} else {
			fmt.Fprintf(&b, "DELETE FROM %s WHERE group_name = %s AND reason = %s;\n", limits, layout.Literal(d.Group), layout.Literal(drainReason))
		}
	}
	fmt.Fprintf(&b, "UPDATE %s SET drained = NULL, updated_at = pg_catalog.now() WHERE layout = %s;\n", l.Table(layout.VersionTable), layout.Literal(layoutID(l)))
	return b.String()
}

func (r *runner) restoreDrained(ctx context.Context, set []drainedGroup) error {
	return r.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, restoreSQL(r.l, set))
		return err
	})
}

// restoreStep is down's step that puts back the overrides a drain set,
// once the unique rule is back; none when no drain is recorded.
func restoreStep(in *inspection) (step, bool) {
	if in.version == nil || len(in.version.drained) == 0 || !in.runtime[layout.LimitsTable] {
		return step{}, false
	}
	return step{name: fmt.Sprintf("restore the limit overrides of the %d group(s) down --drain set to 1", len(in.version.drained)), table: in.l.Table(layout.LimitsTable),
		lock: "none on the queue", kind: stepTx, sql: restoreSQL(in.l, in.version.drained)}, true
}
