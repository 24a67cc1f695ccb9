package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/layout"
)

const concurrencyStatusUsage = `concurrency status [GROUP] [--database URL] [layout flags] [--json]

Shows every group that has a slot, a limit override or a rescheduled job, or
whose class is paused (or only GROUP): its effective limit and where it
comes from (override, class pause, the holders' code), the jobs of the group
in the queue's tables (QUEUED: pending requests; RUNNING: running
processes), the slots held and over a lowered limit, each slot's holder job,
worker, token and expiry, the most rescheduled jobs, and the sessions that
hold the group's admission lock now (pid, lock mode, state, transaction age,
query start): what an enqueue that timed out waiting for the lock waited
for. The layout flags are those of plan and up (default: plain-jobs'
tables in --schema), so that the queued and running jobs are counted in the
right tables.`

// groupJSON is one group of 'concurrency status --json'.
type groupJSON struct {
	Group string `json:"group"`
	Class string `json:"class"`
	Key   string `json:"key"`
	// Limit is the effective limit, nil when nothing limits the group;
	// LimitSource says where it comes from: "class_pause", "override",
	// "code" (the limit the slot holders' code asked for), or "" for none.
	Limit          *int   `json:"limit"`
	LimitSource    string `json:"limit_source"`
	Override       bool   `json:"override"`
	OverrideReason string `json:"override_reason"`
	Paused         bool   `json:"paused"`
	PauseReason    string `json:"pause_reason"`
	// Queued and Running count the group's jobs in the queue's tables; nil
	// when they could not be counted (see queue_note).
	Queued  *int64 `json:"queued"`
	Running *int64 `json:"running"`
	// SlotsHeld counts unexpired slot leases, SlotsOverLimit those at or
	// above a lowered limit.
	SlotsHeld       int                 `json:"slots_held"`
	SlotsOverLimit  int                 `json:"slots_over_limit"`
	Slots           []compat.SlotStatus `json:"slots"`
	RescheduledJobs []compat.WaitingJob `json:"rescheduled_jobs"`
	LockHolders     []compat.LockHolder `json:"lock_holders"`
}

// statusJSON is the whole output of 'concurrency status --json'.
type statusJSON struct {
	Groups        []groupJSON    `json:"groups"`
	PausedClasses []compat.Pause `json:"paused_classes"`
	// QueueNote says why queued and running are null, or "".
	QueueNote string `json:"queue_note"`
}

func runConcurrencyStatus(ctx context.Context, e *env, args []string) error {
	f := newConcurrencyLayoutFlags(e, "status", concurrencyStatusUsage)
	asJSON := f.fs.Bool("json", false, "print one JSON object {\"groups\": [...], \"paused_classes\": [...], \"queue_note\": \"\"} instead of the tables (schema in docs/operations.md)")
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if err := checkGroupName(pos[0]); err != nil {
			return err
		}
	}
	ql, err := f.layout.Layout()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	db, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	var groups []compat.GroupStatus
	if len(pos) == 1 {
		st, err := db.slots.Status(ctx, pos[0])
		if err != nil {
			return f.explain(ctx, db, err)
		}
		groups = []compat.GroupStatus{st}
	} else if groups, err = db.slots.StatusAll(ctx); err != nil {
		return f.explain(ctx, db, err)
	}
	pauses, err := db.slots.Overrides().Pauses(ctx)
	if err != nil {
		return f.explain(ctx, db, err)
	}
	counter, note := newQueueCounter(ctx, db.conn, ql)
	out := statusOf(groups, pauses)
	out.QueueNote = note
	for i := range out.Groups {
		gj := &out.Groups[i]
		if counter != nil {
			q, r, err := counter.count(ctx, db.conn, gj.Class, gj.Key)
			if err != nil {
				return fmt.Errorf("count the jobs of group %s: %w", strconv.Quote(gj.Group), err)
			}
			gj.Queued, gj.Running = &q, &r
		}
	}
	if *asJSON {
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	printConcurrencyStatus(e.stdout, out, time.Now())
	return nil
}

// statusOf renders the runtime's status for output, without job counts.
func statusOf(groups []compat.GroupStatus, pauses []compat.Pause) statusJSON {
	out := statusJSON{Groups: []groupJSON{}, PausedClasses: pauses}
	if out.PausedClasses == nil {
		out.PausedClasses = []compat.Pause{}
	}
	for _, g := range groups {
		gj := groupJSON{Group: g.Group, Override: g.Override, OverrideReason: g.OverrideReason, Paused: g.Paused, PauseReason: g.PauseReason,
			SlotsHeld: g.Active, SlotsOverLimit: g.OverLimit, Slots: g.Slots, RescheduledJobs: g.Waiting, LockHolders: g.LockHolders}
		gj.Class, gj.Key = layout.SplitGroupName(g.Group)
		if g.HasLimit {
			n := g.Limit
			gj.Limit = &n
			switch {
			case g.Paused:
				gj.LimitSource = "class_pause"
			case g.Override:
				gj.LimitSource = "override"
			default:
				gj.LimitSource = "code"
			}
		}
		if gj.RescheduledJobs == nil {
			gj.RescheduledJobs = []compat.WaitingJob{}
		}
		if gj.LockHolders == nil {
			gj.LockHolders = []compat.LockHolder{}
		}
		out.Groups = append(out.Groups, gj)
	}
	return out
}

func printConcurrencyStatus(w io.Writer, st statusJSON, now time.Time) {
	for _, p := range st.PausedClasses {
		fmt.Fprintf(w, "class %s is PAUSED since %s", escapeControl(p.Class), p.Since.UTC().Format(time.RFC3339))
		if p.Reason != "" {
			fmt.Fprintf(w, " (%s)", escapeControl(p.Reason))
		}
		fmt.Fprintf(w, ": no job of it is admitted or started, keyless or keyed; 'migrate-unique concurrency resume %s' lifts it\n", shellArg(p.Class))
	}
	if len(st.PausedClasses) > 0 {
		fmt.Fprintln(w)
	}
	if len(st.Groups) == 0 {
		fmt.Fprintln(w, "no group has a slot, a limit override, a rescheduled job or a paused class")
		return
	}
	if st.QueueNote != "" {
		fmt.Fprintf(w, "QUEUED and RUNNING are not counted: %s\n", st.QueueNote)
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	counted := st.Groups[0].Queued != nil
	if counted {
		fmt.Fprintln(tw, "GROUP\tLIMIT\tQUEUED\tRUNNING\tSLOTS HELD\tOVER LIMIT\tRESCHEDULED")
	} else {
		fmt.Fprintln(tw, "GROUP\tLIMIT\tSLOTS HELD\tOVER LIMIT\tRESCHEDULED")
	}
	count := func(n *int64) string {
		if !counted {
			return ""
		}
		return strconv.FormatInt(*n, 10) + "\t"
	}
	for _, g := range st.Groups {
		limit := "-"
		if g.Limit != nil {
			limit = strconv.Itoa(*g.Limit)
			switch g.LimitSource {
			case "class_pause":
				limit += " (class paused"
				if g.PauseReason != "" {
					limit += ": " + g.PauseReason
				}
				limit += ")"
			case "override":
				limit += " (override"
				if g.OverrideReason != "" {
					limit += ": " + g.OverrideReason
				}
				limit += ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s%d\t%d\t%d\n", escapeControl(g.Group), escapeControl(limit), count(g.Queued), count(g.Running), g.SlotsHeld, g.SlotsOverLimit, len(g.RescheduledJobs))
	}
	tw.Flush()
	for _, g := range st.Groups {
		if len(g.Slots) == 0 && len(g.RescheduledJobs) == 0 && len(g.LockHolders) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", escapeControl(g.Group))
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		if len(g.Slots) > 0 {
			fmt.Fprintln(tw, "  SLOT\tSTATE\tJOB\tWORKER\tTOKEN\tEXPIRES")
		}
		for _, sl := range g.Slots {
			state, expires := "free", "-"
			switch {
			case sl.OverLimit:
				state = "held, over limit"
			case sl.Held:
				state = "held"
			case sl.Expired:
				state = "expired"
			}
			if sl.ExpiresAt != nil {
				expires = sl.ExpiresAt.UTC().Format(time.RFC3339) + " (" + relative(sl.ExpiresAt.Sub(now)) + ")"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\n", sl.Slot, state, escapeControl(dash(sl.JobID)), escapeControl(dash(sl.WorkerID)), sl.Token, expires)
		}
		tw.Flush()
		if len(g.LockHolders) > 0 {
			tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "  LOCK HOLDER PID\tMODE\tSTATE\tTRANSACTION AGE\tQUERY START")
			for _, h := range g.LockHolders {
				qs := "-"
				if h.QueryStart != nil {
					qs = h.QueryStart.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", h.PID, h.Mode, dash(h.State), h.Age.Round(time.Second), qs)
			}
			tw.Flush()
		}
		if len(g.RescheduledJobs) > 0 {
			tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "  RESCHEDULED JOB\tRESCHEDULES\tWAITING SINCE")
			for _, wj := range g.RescheduledJobs {
				fmt.Fprintf(tw, "  %s\t%d\t%s\n", escapeControl(wj.JobID), wj.Reschedules, wj.FirstAt.UTC().Format(time.RFC3339))
			}
			tw.Flush()
		}
	}
}

// queueCounter counts a group's queued and running jobs in the queue's
// tables: the requests and processes tables of a two-table layout, or the
// jobs table's first active state (queued) and its other active states
// (running) in a single-table one. A keyless group is the whole class.
type queueCounter struct {
	l layout.Resolved
	// queued and running are the statements, each with $1 the class and
	// $2 the key ("" for the whole class).
	queued, running string
}

// newQueueCounter returns nil and says why when the queue's tables cannot
// be counted (missing, or without a key column).
func newQueueCounter(ctx context.Context, conn *pgx.Conn, l layout.Resolved) (*queueCounter, string) {
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
	stmt := func(table, key, extra string) string {
		return `SELECT count(*) FROM ` + l.Table(table) + ` WHERE ` + layout.Ident(l.ClassColumn) + ` = $1 AND ($2 = '' OR ` + layout.Ident(key) + ` = $2)` + extra
	}
	qc := &queueCounter{l: l}
	if l.SingleTable() {
		key, err := keyOf(l.JobsTable)
		if err != nil {
			return nil, err.Error()
		}
		state := layout.Ident(l.StateColumn)
		qc.queued = stmt(l.JobsTable, key, ` AND `+state+` = `+layout.Literal(l.PendingState()))
		qc.running = stmt(l.JobsTable, key, ` AND `+l.StatesCondition()+` AND `+state+` <> `+layout.Literal(l.PendingState()))
		return qc, ""
	}
	for _, t := range []struct {
		name string
		into *string
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

func (qc *queueCounter) count(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, class, key string) (queued, running int64, err error) {
	for _, c := range []struct {
		sql  string
		into *int64
	}{{qc.queued, &queued}, {qc.running, &running}} {
		if c.sql == "" {
			continue
		}
		if err := conn.QueryRow(ctx, c.sql, class, key).Scan(c.into); err != nil {
			return 0, 0, err
		}
	}
	return queued, running, nil
}

// runtimeTablesState explains a missing runtime table: which of them exist,
// and whether the queue was rolled back (down keeps the tables that hold
// operator data) or never migrated.
func runtimeTablesState(ctx context.Context, conn *pgx.Conn, schema string) string {
	names := []string{layout.LimitsTable, layout.SlotsTable, layout.ReschedulesTable}
	var present []string
	for _, n := range names {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, layout.Qualified(schema, n)).Scan(&ok); err == nil && ok {
			present = append(present, n)
		}
	}
	if len(present) == 0 {
		return fmt.Sprintf("the runtime tables (%s) are missing in schema %q: the queue is not migrated there; run 'migrate-unique up' first, or pass the right --schema", strings.Join(names, ", "), schema)
	}
	return fmt.Sprintf("schema %q holds only %s of the runtime tables (%s): the queue was rolled back with 'down', which kept them because they hold operator data, and the runtime is not in use. 'migrate-unique up' migrates the queue again (the kept overrides apply again); 'migrate-unique down' drops them once they hold nothing, 'migrate-unique down --drop-operator-data' drops them now",
		schema, strings.Join(present, ", "), strings.Join(names, ", "))
}
