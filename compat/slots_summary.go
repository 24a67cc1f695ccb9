package compat

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// GroupSummary is one group as StatusAll reports it, reduced to counts:
// what a list of every group shows (the dashboard's groups page), without
// the slot rows, the waiting jobs and the lock holders.
type GroupSummary struct {
	// Group, Limit, HasLimit, Override, OverrideReason, Paused and
	// PauseReason are StatusAll's.
	Group          string
	Limit          int
	HasLimit       bool
	Override       bool
	OverrideReason string
	Paused         bool
	PauseReason    string
	// Active counts unexpired leases, Expired expired ones (a lease holds
	// the row but its expiry has passed), OverLimit the unexpired leases at
	// or above Limit: StatusAll's Active, its slots with Expired, its
	// OverLimit.
	Active, Expired, OverLimit int
	// Slots counts the group's slot rows (free, held and expired).
	Slots int
	// Waiting counts the group's rescheduled jobs (StatusAll lists the 10
	// most rescheduled of them).
	Waiting int
}

// Summaries reports every group StatusAll reports, ordered by name, each
// as counts computed by PostgreSQL: one statement, one row per group,
// reading each runtime table once (its cost follows the number of slot,
// override and reschedule rows, not a statement per group).
func (s *Slots) Summaries(ctx context.Context) ([]GroupSummary, error) {
	limits, slots, reschedules := s.l.Table(layout.LimitsTable), s.l.Table(layout.SlotsTable), s.l.Table(layout.ReschedulesTable)
	// One row per slot row, override, rescheduled job and paused class,
	// aggregated by group name; each table is scanned and hashed, never
	// probed per group. A pause is the row class || '::' of a class
	// without '::' (isPause); every other row of concurrency_limits is a
	// group's override. A group's class is its name's part before the
	// first '::' (layout.SplitGroupName). The limit the holders' code asked
	// for is the highest positive limit of a slot row that holds a lease,
	// expired or not (status's codeLimit); the effective limit is 0 under
	// a pause, else the override's, else the code's; a held slot at or
	// above it is over the limit. The order is the bytes' (Go's < on
	// strings, as StatusAll sorts), whatever the database's collation.
	rows, err := s.db.Query(ctx, qualify.Must(`SELECT g.group_name, g.override, g.override_reason, p.reason, g.code_limit, g.slots, g.held, g.expired, g.over_limit, g.waiting
FROM (
    SELECT u.group_name, max(u.override) AS override, max(u.override_reason) AS override_reason, max(u.code_limit) AS code_limit,
        count(*) FILTER (WHERE u.slot) AS slots, count(*) FILTER (WHERE u.held) AS held, count(*) FILTER (WHERE NOT u.held) AS expired,
        count(*) FILTER (WHERE u.over_limit) AS over_limit, count(*) FILTER (WHERE u.waiting) AS waiting
    FROM (
        SELECT s.group_name, true AS slot, s.held, c.code_limit,
            s.held AND s.slot >= (CASE WHEN p.class IS NOT NULL THEN 0 ELSE coalesce(o.concurrency_limit, c.code_limit) END) AS over_limit,
            NULL::integer AS override, NULL::text AS override_reason, false AS waiting
        FROM (SELECT group_name, slot, expires_at > clock_timestamp() AS held FROM `+slots+`) s
        LEFT JOIN (
            SELECT group_name, max(concurrency_limit) AS code_limit FROM `+slots+`
            WHERE expires_at IS NOT NULL AND concurrency_limit > 0 GROUP BY group_name
        ) c ON c.group_name = s.group_name
        LEFT JOIN `+limits+` o ON o.group_name = s.group_name
            AND NOT (`+isPause("o.group_name")+`)
        LEFT JOIN (
            SELECT split_part(group_name, '::', 1) AS class FROM `+limits+`
            WHERE `+isPause("group_name")+`
        ) p ON p.class = split_part(s.group_name, '::', 1)
        UNION ALL
        SELECT group_name, false, NULL, NULL, NULL, concurrency_limit, reason, false FROM `+limits+`
        WHERE NOT (`+isPause("group_name")+`)
        UNION ALL
        SELECT group_name, false, NULL, NULL, NULL, NULL, NULL, true FROM `+reschedules+`
        UNION ALL
        SELECT split_part(group_name, '::', 1), false, NULL, NULL, NULL, NULL, NULL, false FROM `+limits+`
        WHERE `+isPause("group_name")+`
    ) u
    GROUP BY u.group_name
) g
LEFT JOIN (
    SELECT split_part(group_name, '::', 1) AS class, reason FROM `+limits+`
    WHERE `+isPause("group_name")+`
) p ON p.class = split_part(g.group_name, '::', 1)
ORDER BY g.group_name COLLATE pg_catalog."C"`))
	if err != nil {
		return nil, fmt.Errorf("read the groups' summaries: %w", s.explain(err))
	}
	defer rows.Close()
	var out []GroupSummary
	for rows.Next() {
		var (
			g                           GroupSummary
			override, codeLimit         pgtype.Int4
			overrideReason, pauseReason pgtype.Text
			slotCount, held, expired    int64
			overLimit, waiting          int64
		)
		if err := rows.Scan(&g.Group, &override, &overrideReason, &pauseReason, &codeLimit, &slotCount, &held, &expired, &overLimit, &waiting); err != nil {
			return nil, fmt.Errorf("read the groups' summaries: %w", err)
		}
		switch {
		case override.Valid:
			g.Limit, g.HasLimit, g.Override, g.OverrideReason = int(override.Int32), true, true, overrideReason.String
		case codeLimit.Valid:
			g.Limit, g.HasLimit = int(codeLimit.Int32), true
		}
		if pauseReason.Valid {
			g.Paused, g.PauseReason, g.Limit, g.HasLimit = true, pauseReason.String, 0, true
		}
		g.Slots, g.Active, g.Expired, g.OverLimit, g.Waiting = int(slotCount), int(held), int(expired), int(overLimit), int(waiting)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the groups' summaries: %w", s.explain(err))
	}
	return out, nil
}

// isPause is the SQL condition that the concurrency_limits row whose group
// name is the column name is a class pause (isPauseName, PauseName).
func isPause(name string) string {
	return "(split_part(" + name + ", '::', 1) <> '' AND " + name + " = (split_part(" + name + ", '::', 1) || '::'))"
}
