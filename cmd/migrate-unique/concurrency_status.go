package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
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

// groupJSON and statusJSON are the output of 'concurrency status --json',
// read by groupstatus (shared with the dashboard).
type (
	groupJSON  = groupstatus.Group
	statusJSON = groupstatus.Report
)

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
	group := ""
	if len(pos) == 1 {
		group = pos[0]
	}
	var out statusJSON
	err = db.run(ctx, func(h pgurl.Handle, slots *compat.Slots) (err error) {
		out, err = groupstatus.Read(ctx, h, slots, ql, group)
		return err
	})
	if err != nil {
		return f.explain(ctx, db, err)
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

func printConcurrencyStatus(w io.Writer, st statusJSON, now time.Time) {
	for _, p := range st.PausedClasses {
		fmt.Fprintf(w, "class %s is PAUSED since %s", escapeName(p.Class), p.Since.UTC().Format(time.RFC3339))
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
		fmt.Fprintf(tw, "%s\t%s\t%s%s%d\t%d\t%d\n", escapeName(g.Group), escapeControl(limit), count(g.Queued), count(g.Running), g.SlotsHeld, g.SlotsOverLimit, len(g.RescheduledJobs))
	}
	tw.Flush()
	for _, g := range st.Groups {
		if len(g.Slots) == 0 && len(g.RescheduledJobs) == 0 && len(g.LockHolders) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", escapeName(g.Group))
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
