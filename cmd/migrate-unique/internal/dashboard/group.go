package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Job is one queued or running job of a group's page.
type Job struct {
	// ID is the job's id as the slot table and the reschedule counters
	// keep it (a two-table layout's uuid, else the id column).
	ID string
	// CreatedAt, StartAt (when it may start: plain-jobs' start_at, a
	// single-table layout's run_at) and StartedAt are nil where the table
	// has no such column.
	CreatedAt, StartAt, StartedAt *time.Time
	// Reschedules counts its busy reschedules since it last had a slot.
	Reschedules int64
}

// JobList is one page of a group's queued or running jobs.
type JobList struct {
	Jobs []Job
	// Note says why the list is empty when it cannot be read ("" else).
	Note string
	// Page starts at 1; Prev and Next are links, "" past either end.
	Page       int
	Prev, Next string
}

// jobColumns are the columns a job list reads from one table; "" for a
// column the table lacks.
type jobColumns struct {
	table, key                    string
	id, created, startAt, started string
	// state restricts a single-table layout's rows ("" for none).
	state string
}

// columnsOf finds the columns of table among candidates, first match wins.
func columnsOf(ctx context.Context, conn pgurl.Handle, schema, table string) (map[string]bool, error) {
	rows, err := conn.Query(ctx, `SELECT a.attname::pg_catalog.text FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped`, schema, table)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

func first(have map[string]bool, names ...string) string {
	for _, n := range names {
		if have[n] {
			return n
		}
	}
	return ""
}

// jobTables returns the queued and the running jobs' columns of the
// layout; a zero jobColumns (table "") where there is no such table.
func jobTables(ctx context.Context, conn pgurl.Handle, l layout.Resolved) (queued, running jobColumns, err error) {
	of := func(table string, startAt, started []string) (jobColumns, error) {
		if table == "" {
			return jobColumns{}, nil
		}
		have, err := columnsOf(ctx, conn, l.Schema, table)
		if err != nil {
			return jobColumns{}, err
		}
		if len(have) == 0 {
			return jobColumns{}, fmt.Errorf("table %s does not exist", l.Table(table))
		}
		c := jobColumns{table: table, key: first(have, layout.KeyColumn, layout.LegacyKeyColumn),
			created: first(have, "created_at", "inserted_at", "enqueued_at"),
			startAt: first(have, startAt...), started: first(have, started...)}
		if l.SingleTable() {
			c.id = first(have, l.IDColumn)
		} else {
			c.id = first(have, "uuid", "id")
		}
		if c.key == "" || c.id == "" {
			return jobColumns{}, fmt.Errorf("table %s has no key or id column", l.Table(table))
		}
		return c, nil
	}
	if l.SingleTable() {
		if queued, err = of(l.JobsTable, []string{l.RunAtColumn}, nil); err != nil {
			return
		}
		running = queued
		queued.state = layout.Ident(l.StateColumn) + ` OPERATOR(pg_catalog.=) ` + layout.Literal(l.PendingState())
		running.state = l.StatesCondition() + ` AND ` + layout.Ident(l.StateColumn) + ` OPERATOR(pg_catalog.<>) ` + layout.Literal(l.PendingState())
		return
	}
	if queued, err = of(l.RequestsTable, []string{"start_at", "run_at", "scheduled_at"}, nil); err != nil {
		return
	}
	running, err = of(l.ProcessesTable, nil, []string{"started_at"})
	return
}

// listJobs reads one page of a group's jobs in c's table, oldest first
// (by creation time where the table has one, else by id), with their
// reschedule counts: at most limit rows, an index probe on the class (and
// key) and a sort of the group's rows.
func listJobs(ctx context.Context, conn pgurl.Handle, l layout.Resolved, c jobColumns, class, key string, limit, offset int) ([]Job, error) {
	t := func(col string) string {
		if col == "" {
			return "NULL::pg_catalog.timestamptz"
		}
		return "j." + layout.Ident(col)
	}
	order := "j." + layout.Ident(c.id)
	if c.created != "" {
		order = "j." + layout.Ident(c.created) + ", " + order
	}
	where := "j." + layout.Ident(l.ClassColumn) + " OPERATOR(pg_catalog.=) $1::pg_catalog.text"
	if key != "" {
		where += " AND j." + layout.Ident(c.key) + " OPERATOR(pg_catalog.=) $2::pg_catalog.text"
	} else {
		where += " AND $2::pg_catalog.text OPERATOR(pg_catalog.=) ''"
	}
	if c.state != "" {
		where += " AND j." + c.state
	}
	rows, err := conn.Query(ctx, `SELECT j.`+layout.Ident(c.id)+`::pg_catalog.text, `+t(c.created)+`, `+t(c.startAt)+`, `+t(c.started)+`, COALESCE(r.reschedules, 0)
FROM `+l.Table(c.table)+` j LEFT JOIN `+l.Table(layout.ReschedulesTable)+` r ON r.job_id OPERATOR(pg_catalog.=) j.`+layout.Ident(c.id)+`::pg_catalog.text
WHERE `+where+` ORDER BY `+order+` LIMIT $3::pg_catalog.int8 OFFSET $4::pg_catalog.int8`, class, key, limit, offset)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) {
		var j Job
		return j, r.Scan(&j.ID, &j.CreatedAt, &j.StartAt, &j.StartedAt, &j.Reschedules)
	})
}

func (s *Server) groupPage(ctx context.Context, r *http.Request) (string, map[string]any, error) {
	q := r.URL.Query()
	name := q.Get("name")
	if err := groupstatus.CheckGroupName(name); err != nil {
		return "", nil, err
	}
	page := func(param string) int {
		p, err := strconv.Atoi(q.Get(param))
		if err != nil || p < 1 {
			return 1
		}
		return p
	}
	queued, running := JobList{Page: page("qpage")}, JobList{Page: page("rpage")}
	var g groupstatus.Group
	var ov compat.Override
	var hasOverride bool
	err := s.db(ctx, func(conn pgurl.Handle, slots *compat.Slots) error {
		rep, err := groupstatus.Read(ctx, conn, slots, s.o.Layout, name)
		if err != nil {
			return err
		}
		g = rep.Groups[0]
		if ov, hasOverride, err = slots.Overrides().Get(ctx, name); err != nil {
			return err
		}
		qc, rc, err := jobTables(ctx, conn, s.o.Layout)
		if err != nil {
			queued.Note, running.Note = err.Error(), err.Error()
			return nil
		}
		for _, x := range []struct {
			c    jobColumns
			list *JobList
		}{{qc, &queued}, {rc, &running}} {
			if x.c.table == "" {
				x.list.Note = "the layout has no table of these jobs"
				continue
			}
			if x.list.Jobs, err = listJobs(ctx, conn, s.o.Layout, x.c, g.Class, g.Key, s.o.PageSize, (x.list.Page-1)*s.o.PageSize); err != nil {
				return fmt.Errorf("list the jobs of group %q in %s: %w", name, s.o.Layout.Table(x.c.table), err)
			}
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	link := func(qp, rp int) string {
		return "/group?" + url.Values{"name": {name}, "qpage": {strconv.Itoa(qp)}, "rpage": {strconv.Itoa(rp)}}.Encode()
	}
	total := func(n *int64) int64 {
		if n == nil {
			return 0
		}
		return *n
	}
	if queued.Page > 1 {
		queued.Prev = link(queued.Page-1, running.Page)
	}
	if int64(queued.Page*s.o.PageSize) < total(g.Queued) {
		queued.Next = link(queued.Page+1, running.Page)
	}
	if running.Page > 1 {
		running.Prev = link(queued.Page, running.Page-1)
	}
	if int64(running.Page*s.o.PageSize) < total(g.Running) {
		running.Next = link(queued.Page, running.Page+1)
	}
	known := len(g.Slots) > 0 || g.Override || g.Paused || len(g.RescheduledJobs) > 0 || total(g.Queued)+total(g.Running) > 0
	if !known {
		return "", nil, &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("group %q has no slot, no override, no rescheduled job and no queued or running job; check the name (a group is a class, or class::key)", name)}
	}
	return "group.html", map[string]any{"Title": "Group " + name, "G": g, "Row": rowOf(groupstatus.SummaryOf(g)), "Override": ov, "HasOverride": hasOverride,
		"Queued": queued, "Running": running, "Now": time.Now()}, nil
}
