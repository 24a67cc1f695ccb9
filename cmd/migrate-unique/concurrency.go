package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Owned by the execution issue: concurrency status | release | set.

const concurrencyUsage = `concurrency status|release|set ...

  concurrency status [GROUP] [--database URL] [--schema S] [--json]
      every group (or one) with its limit, active slots, holders, expiries,
      over-limit holders and most rescheduled waiting jobs
  concurrency release GROUP SLOT --force [--database URL] [--schema S]
      free a stuck slot; its old holder's token stops working
  concurrency set GROUP --limit N [--reason TEXT] [--database URL] [--schema S]
  concurrency set GROUP --clear [--database URL] [--schema S]
      write or remove a limit override, used by admission and execution
      alike; --limit 0 is the maintenance switch

A GROUP is a job class, or class::key.`

func runConcurrency(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		fmt.Fprintf(e.stderr, "Usage: migrate-unique %s\n", concurrencyUsage)
		return &exitError{code: 2}
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		fmt.Fprintf(e.stdout, "Usage: migrate-unique %s\n", concurrencyUsage)
		return nil
	case "status":
		return runConcurrencyStatus(ctx, e, args[1:])
	case "release":
		return runConcurrencyRelease(ctx, e, args[1:])
	case "set":
		return runConcurrencySet(ctx, e, args[1:])
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown subcommand %q; choose status, release or set", args[0])}
}

// concurrencyFlags are the flags every concurrency subcommand shares.
type concurrencyFlags struct {
	fs       *flag.FlagSet
	usage    string
	database *string
	schema   *string
}

func newConcurrencyFlags(e *env, name, usage string) *concurrencyFlags {
	fs := newFlagSet(e, "concurrency "+name, usage)
	return &concurrencyFlags{
		fs:       fs,
		usage:    usage,
		database: fs.String("database", "", databaseFlagUsage),
		schema:   fs.String("schema", "public", "schema that holds the runtime tables (concurrency_slots, concurrency_limits)"),
	}
}

// parse parses flags and positional arguments in any order and checks the
// number of positional arguments.
func (f *concurrencyFlags) parse(args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(f.fs, args); err != nil {
			return nil, err
		}
		if f.fs.NArg() == 0 {
			break
		}
		pos = append(pos, f.fs.Arg(0))
		args = f.fs.Args()[1:]
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		return nil, &exitError{code: 2, err: fmt.Errorf("%d argument(s) given; usage: migrate-unique %s", len(pos), strings.SplitN(f.usage, "\n", 2)[0])}
	}
	return pos, nil
}

// open connects and returns the slot API, with a function to close it.
func (f *concurrencyFlags) open(ctx context.Context) (*compat.Slots, string, func(), error) {
	url, err := pgurl.Resolve(*f.database)
	if err != nil {
		return nil, "", nil, &exitError{code: 2, err: err}
	}
	if *f.schema == "" || strings.ContainsRune(*f.schema, 0) {
		return nil, "", nil, &exitError{code: 2, err: fmt.Errorf("--schema %q: give the schema that holds the runtime tables", *f.schema)}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, "", nil, fmt.Errorf("connect: %w", pgurl.RedactError(url, err))
	}
	l := layout.Layout{Schema: *f.schema, RequestsTable: layout.PlainJobsRequests}
	s, err := compat.NewSlots(compat.Pgx(conn), l, compat.SlotsOptions{})
	if err != nil {
		conn.Close(context.Background())
		return nil, "", nil, err
	}
	return s, url, func() { conn.Close(context.Background()) }, nil
}

// explain turns a database error into one that says what to do.
func (f *concurrencyFlags) explain(url string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		// The server's error alone: the runtime's own wording of the same
		// fix would say it twice.
		return fmt.Errorf("the runtime tables (%s, %s, %s) are missing in schema %q; run 'migrate-unique up' first, or pass the right --schema: %w",
			layout.SlotsTable, layout.LimitsTable, layout.ReschedulesTable, *f.schema, pgErr)
	}
	if errors.Is(err, compat.ErrSlotArgument) {
		return &exitError{code: 2, err: err}
	}
	return pgurl.RedactError(url, err)
}

const concurrencyStatusUsage = `concurrency status [GROUP] [--database URL] [--schema S] [--json]

Shows every group that has a slot, a limit override or a waiting job (or
only GROUP): its limit (an override wins over the limit the holders' code
asked for), active slots, each slot's holder job, worker, token and expiry,
holders over a lowered limit, the most rescheduled waiting jobs, and the
sessions that hold the group's admission lock now (pid, lock mode, state,
transaction age, query start): what an enqueue that timed out waiting for
the lock waited for.`

func runConcurrencyStatus(ctx context.Context, e *env, args []string) error {
	f := newConcurrencyFlags(e, "status", concurrencyStatusUsage)
	asJSON := f.fs.Bool("json", false, "print one JSON object {\"groups\": [...]} instead of the table")
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	s, url, closeDB, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	var groups []compat.GroupStatus
	if len(pos) == 1 {
		st, err := s.Status(ctx, pos[0])
		if err != nil {
			return f.explain(url, err)
		}
		groups = []compat.GroupStatus{st}
	} else if groups, err = s.StatusAll(ctx); err != nil {
		return f.explain(url, err)
	}
	if *asJSON {
		b, err := json.Marshal(struct {
			Groups []compat.GroupStatus `json:"groups"`
		}{groups})
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	printConcurrencyStatus(e.stdout, groups, time.Now())
	return nil
}

func printConcurrencyStatus(w io.Writer, groups []compat.GroupStatus, now time.Time) {
	if len(groups) == 0 {
		fmt.Fprintln(w, "no group has a slot, a limit override or a waiting job")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tLIMIT\tACTIVE\tOVER LIMIT\tWAITING")
	for _, g := range groups {
		limit := "-"
		if g.HasLimit {
			limit = strconv.Itoa(g.Limit)
			if g.Override {
				limit += " (override"
				if g.OverrideReason != "" {
					limit += ": " + g.OverrideReason
				}
				limit += ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", g.Group, limit, g.Active, g.OverLimit, len(g.Waiting))
	}
	tw.Flush()
	for _, g := range groups {
		if len(g.Slots) == 0 && len(g.Waiting) == 0 && len(g.LockHolders) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", g.Group)
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
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\n", sl.Slot, state, dash(sl.JobID), dash(sl.WorkerID), sl.Token, expires)
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
		if len(g.Waiting) > 0 {
			tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "  WAITING JOB\tRESCHEDULES\tWAITING SINCE")
			for _, wj := range g.Waiting {
				fmt.Fprintf(tw, "  %s\t%d\t%s\n", wj.JobID, wj.Reschedules, wj.FirstAt.UTC().Format(time.RFC3339))
			}
			tw.Flush()
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func relative(d time.Duration) string {
	d = d.Round(time.Second)
	if d < 0 {
		return (-d).String() + " ago"
	}
	return "in " + d.String()
}

const concurrencyReleaseUsage = `concurrency release GROUP SLOT --force [--database URL] [--schema S]

Frees a stuck slot whatever its holder. The old holder's token stops
working: its extend and release fail with a lost lease, and its worker
cancels the job. Use it when a holder is known to be gone and its lease is
too long to wait out.`

func runConcurrencyRelease(ctx context.Context, e *env, args []string) error {
	f := newConcurrencyFlags(e, "release", concurrencyReleaseUsage)
	force := f.fs.Bool("force", false, "required: confirms that the slot's holder may lose it while running")
	pos, err := f.parse(args, 2, 2)
	if err != nil {
		return err
	}
	slot, err := strconv.Atoi(pos[1])
	if err != nil || slot < 0 {
		return &exitError{code: 2, err: fmt.Errorf("slot %q: give the slot number shown by 'migrate-unique concurrency status %s'", pos[1], pos[0])}
	}
	if !*force {
		return &exitError{code: 2, err: fmt.Errorf("refusing to free slot %d of group %q without --force: its holder may still be running; check 'migrate-unique concurrency status %s' first", slot, pos[0], pos[0])}
	}
	s, url, closeDB, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	l, err := s.ForceRelease(ctx, pos[0], slot)
	if err != nil {
		return f.explain(url, err)
	}
	if l.JobID == "" {
		fmt.Fprintf(e.stdout, "freed slot %d of group %s (it was not held)\n", l.Slot, l.Group)
		return nil
	}
	fmt.Fprintf(e.stdout, "freed slot %d of group %s: job %s on worker %s, token %d, no longer valid\n", l.Slot, l.Group, l.JobID, dash(l.WorkerID), l.Token)
	return nil
}

const concurrencySetUsage = `concurrency set GROUP --limit N [--reason TEXT] | --clear [--database URL] [--schema S]

Writes (--limit) or removes (--clear) an operator override of a group's
limit in concurrency_limits. The override wins over the code's limit for
admission and execution alike, without a deploy. --limit 0 blocks the group
(the maintenance switch). Lowering a limit hands out no slot at or above it;
current holders finish and show as over the limit.`

func runConcurrencySet(ctx context.Context, e *env, args []string) error {
	f := newConcurrencyFlags(e, "set", concurrencySetUsage)
	limit := f.fs.Int("limit", 0, "the group's new limit, 0 or more (0 runs and admits nothing)")
	reason := f.fs.String("reason", "", "a note kept with the override, shown by status")
	clearIt := f.fs.Bool("clear", false, "remove the override; the code's limit applies again")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	limitSet := false
	f.fs.Visit(func(fl *flag.Flag) { limitSet = limitSet || fl.Name == "limit" })
	switch {
	case limitSet == *clearIt:
		return &exitError{code: 2, err: errors.New("give exactly one of --limit N and --clear")}
	case *clearIt && *reason != "":
		return &exitError{code: 2, err: errors.New("--reason goes with --limit, not --clear")}
	case limitSet && *limit < 0:
		return &exitError{code: 2, err: fmt.Errorf("--limit %d: a limit is 0 (block the group) or more", *limit)}
	}
	s, url, closeDB, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	group := pos[0]
	if *clearIt {
		had, err := s.ClearLimit(ctx, group)
		if err != nil {
			return f.explain(url, err)
		}
		if !had {
			fmt.Fprintf(e.stdout, "group %s had no override; nothing changed\n", group)
			return nil
		}
		fmt.Fprintf(e.stdout, "cleared the override of group %s; the code's limit applies\n", group)
		return nil
	}
	if err := s.SetLimit(ctx, group, *limit, *reason); err != nil {
		return f.explain(url, err)
	}
	st, err := s.Status(ctx, group)
	if err != nil {
		return f.explain(url, err)
	}
	fmt.Fprintf(e.stdout, "group %s: limit %d (override)", group, *limit)
	if *limit == 0 {
		fmt.Fprint(e.stdout, "; nothing of this group is admitted or started")
	}
	if st.OverLimit > 0 {
		fmt.Fprintf(e.stdout, "; %d holder(s) over the new limit finish their jobs", st.OverLimit)
	}
	fmt.Fprintln(e.stdout)
	return nil
}
