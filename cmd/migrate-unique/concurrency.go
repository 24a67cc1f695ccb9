package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Owned by the execution issue: concurrency status | release | set.

const concurrencyUsage = `concurrency status|release|set|pause|resume|serve ...

  concurrency status [GROUP] [--database URL] [layout flags] [--json]
      every group (or one) with its limit, queued and running jobs, slots
      held, holders, expiries, over-limit holders, most rescheduled jobs
      and paused classes
  concurrency release GROUP SLOT --force [--database URL] [--schema S] [--json]
      free a stuck slot; its old holder's token stops working
  concurrency set GROUP --limit N [--reason TEXT] [--force] [--database URL] [--schema S] [--json]
  concurrency set GROUP --clear [--database URL] [--schema S] [--json]
      write or remove a limit override, used by admission and execution
      alike; --limit 0 is the maintenance switch of one group
  concurrency pause CLASS [--reason TEXT] [--database URL] [--schema S] [--json]
  concurrency resume CLASS [--database URL] [--schema S] [--json]
      stop (and start again) a whole class: its keyless group and every key
  concurrency serve [--database URL] [layout flags] [--listen 127.0.0.1:8080] [--token T] [--read-only]
      the same in a browser: groups by pressure, each group's slots and
      jobs, and the switches above, each confirmed first

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
	case "pause":
		return runConcurrencyPause(ctx, e, args[1:])
	case "resume":
		return runConcurrencyResume(ctx, e, args[1:])
	case "serve":
		return runConcurrencyServe(ctx, e, args[1:])
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown subcommand %q; choose status, release, set, pause, resume or serve", args[0])}
}

// concurrencyFlags are the flags every concurrency subcommand shares.
type concurrencyFlags struct {
	fs       *flag.FlagSet
	usage    string
	database *string
	schema   *string
	// layout is set for a command that reads the queue's tables too
	// (status): its --schema is the layout's.
	layout *layout.Flags
}

// newConcurrencyLayoutFlags is newConcurrencyFlags with the layout flags
// of the migration commands, for a command that reads the queue's tables.
func newConcurrencyLayoutFlags(e *env, name, usage string) *concurrencyFlags {
	fs := newFlagSet(e, "concurrency "+name, usage)
	lf := layout.RegisterFlags(fs)
	return &concurrencyFlags{fs: fs, usage: usage, database: fs.String("database", "", databaseFlagUsage), schema: new(string), layout: lf}
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
	if f.layout != nil {
		*f.schema = f.fs.Lookup("schema").Value.String()
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		return nil, &exitError{code: 2, err: fmt.Errorf("%d argument(s) given; usage: migrate-unique %s", len(pos), strings.SplitN(f.usage, "\n", 2)[0])}
	}
	return pos, nil
}

// opened is a connection to the runtime tables.
type opened struct {
	conn   *pgx.Conn
	url    string
	schema string
}

func (o *opened) close() { o.conn.Close(context.Background()) }

// run runs f, one unit of the command's work, with the slot API on it
// (pgurl.Run): on a session that could not start with the pinned
// search_path (a pooler refused the startup parameter), f's statements run
// in one transaction that pins it first, committed when f returns nil.
// Errors are f's, for explain.
func (o *opened) run(ctx context.Context, f func(h pgurl.Handle, slots *compat.Slots) error) error {
	return pgurl.Run(ctx, o.conn, func(h pgurl.Handle) error {
		s, err := compat.NewSlots(compat.Pgx(h), layout.Layout{Schema: o.schema, RequestsTable: layout.PlainJobsRequests}, compat.SlotsOptions{})
		if err != nil {
			return err
		}
		return f(h, s)
	})
}

// open connects. Every statement is a single round trip with no session
// state (see pgurl.Connect), and each unit of work pins its own
// search_path where the session could not (run), so the commands work the
// same through a transaction-mode pooler.
func (f *concurrencyFlags) open(ctx context.Context) (*opened, error) {
	url, err := pgurl.Resolve(*f.database)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	if strings.ContainsRune(*f.schema, 0) {
		return nil, &exitError{code: 2, err: fmt.Errorf("--schema %q: give the schema that holds the runtime tables", *f.schema)}
	}
	conn, err := pgurl.Connect(ctx, url, "migrate-unique concurrency")
	if err != nil {
		return nil, err
	}
	return &opened{conn: conn, url: url, schema: *f.schema}, nil
}

// explain turns an error of run into one that says what to do. An exit
// error (bad input, a refusal the command made) is returned as it is.
func (f *concurrencyFlags) explain(ctx context.Context, db *opened, err error) error {
	var exit *exitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		return err
	case errors.Is(err, compat.ErrSlotArgument):
		return &exitError{code: 2, err: err}
	}
	return groupstatus.Explain(ctx, db.conn, *f.schema, db.url, err)
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

const concurrencyReleaseUsage = `concurrency release GROUP SLOT --force [--database URL] [--schema S] [--json]

Frees a stuck slot whatever its holder. The old holder's token stops
working: its extend and release fail with a lost lease, and its worker
cancels the job. Use it when a holder is known to be gone and its lease is
too long to wait out.`

func runConcurrencyRelease(ctx context.Context, e *env, args []string) (err error) {
	f := newConcurrencyFlags(e, "release", concurrencyReleaseUsage)
	force := f.fs.Bool("force", false, "required: confirms that the slot's holder may lose it while running")
	j := newJSONChange(f.fs, "release")
	pos, err := f.parse(args, 2, 2)
	if err != nil {
		return err
	}
	e = j.begin(e)
	defer func() { err = j.finish(err) }()
	if err := checkGroupName(pos[0]); err != nil {
		return err
	}
	// A slot is an integer column: a number beyond it is a typo, not a
	// driver encoding error.
	slot64, err := strconv.ParseInt(pos[1], 10, 32)
	if err != nil || slot64 < 0 {
		return &exitError{code: 2, err: fmt.Errorf("slot %s: give a slot number from 0 to %d, as shown by 'migrate-unique concurrency status %s'", strconv.Quote(pos[1]), math.MaxInt32, shellArg(pos[0]))}
	}
	slot := int(slot64)
	if !*force {
		return &exitError{code: 2, err: fmt.Errorf("refusing to free slot %d of group %s without --force: its holder may still be running; check 'migrate-unique concurrency status %s' first", slot, strconv.Quote(pos[0]), shellArg(pos[0]))}
	}
	db, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	var l compat.Lease
	err = db.run(ctx, func(_ pgurl.Handle, slots *compat.Slots) (err error) {
		l, err = slots.ForceRelease(ctx, pos[0], slot)
		return err
	})
	if errors.Is(err, compat.ErrSlotArgument) {
		// The arguments are checked above: what is left is a slot the
		// group does not have, a fact about the database, not a usage
		// error.
		return fmt.Errorf("group %s has no slot %d; nothing was freed ('migrate-unique concurrency status %s' lists its slots)", strconv.Quote(pos[0]), slot, shellArg(pos[0]))
	}
	if err != nil {
		return f.explain(ctx, db, err)
	}
	j.res.Group, j.res.Changed, j.res.Slot, j.res.JobID, j.res.WorkerID, j.res.Token = l.Group, true, l.Slot, l.JobID, l.WorkerID, l.Token
	if l.JobID == "" {
		fmt.Fprintf(e.stdout, "freed slot %d of group %s (it was not held)\n", l.Slot, escapeName(l.Group))
		return nil
	}
	fmt.Fprintf(e.stdout, "freed slot %d of group %s: job %s on worker %s, token %d, no longer valid\n", l.Slot, escapeName(l.Group), escapeControl(l.JobID), escapeControl(dash(l.WorkerID)), l.Token)
	return nil
}

const concurrencySetUsage = `concurrency set GROUP --limit N [--reason TEXT] [--force] | --clear [--database URL] [--schema S] [--json]

Writes (--limit) or removes (--clear) an operator override of a group's
limit in concurrency_limits. The override wins over the code's limit for
admission and execution alike, without a deploy. --limit 0 blocks the group
(the maintenance switch). Lowering a limit hands out no slot at or above it;
current holders finish and show as over the limit.

GROUP is checked first: a name no job can have (an empty class or key around
'::', a NUL byte or invalid UTF-8, a key longer than the queue's key column)
is refused (a name with control characters is typed as $'...', the way
status shows it), and a group with no job, slot or override yet is refused unless
--force is given, so that a misspelt group never takes the override.`

func runConcurrencySet(ctx context.Context, e *env, args []string) (err error) {
	f := newConcurrencyFlags(e, "set", concurrencySetUsage)
	limit := f.fs.Int("limit", 0, "the group's new limit, 0 or more (0 runs and admits nothing)")
	reason := f.fs.String("reason", "", "a note kept with the override, shown by status")
	clearIt := f.fs.Bool("clear", false, "remove the override; the code's limit applies again")
	force := f.fs.Bool("force", false, "set the override even though the group has no job, slot or override yet (checked to catch a misspelt group)")
	j := newJSONChange(f.fs, "set")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	e = j.begin(e)
	defer func() { err = j.finish(err) }()
	limitSet := false
	f.fs.Visit(func(fl *flag.Flag) { limitSet = limitSet || fl.Name == "limit" })
	switch {
	case limitSet == *clearIt:
		return &exitError{code: 2, err: errors.New("give exactly one of --limit N and --clear")}
	case *clearIt && *reason != "":
		return &exitError{code: 2, err: errors.New("--reason goes with --limit, not --clear")}
	case limitSet && *limit < 0:
		return &exitError{code: 2, err: fmt.Errorf("--limit %d: a limit is 0 (block the group) or more", *limit)}
	case limitSet && *limit > math.MaxInt32:
		return &exitError{code: 2, err: fmt.Errorf("--limit %d: at most %d (leave the group without an override for no limit)", *limit, math.MaxInt32)}
	case strings.IndexFunc(*reason, isControl) >= 0 || !utf8.ValidString(*reason):
		return &exitError{code: 2, err: fmt.Errorf("--reason %s contains a control character or invalid UTF-8; give one line of plain text", strconv.Quote(*reason))}
	}
	group := pos[0]
	if err := checkGroupName(group); err != nil {
		return err
	}
	db, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	shown := escapeName(group)
	j.res.Group = group
	if *clearIt {
		var had bool
		err := db.run(ctx, func(_ pgurl.Handle, slots *compat.Slots) (err error) {
			had, err = slots.Overrides().ClearLimit(ctx, group)
			return err
		})
		if err != nil {
			return f.explain(ctx, db, err)
		}
		j.res.Command, j.res.Changed = "clear", had
		if !had {
			fmt.Fprintf(e.stdout, "group %s had no override; nothing changed\n", shown)
			return nil
		}
		fmt.Fprintf(e.stdout, "cleared the override of group %s; the code's limit applies\n", shown)
		return nil
	}
	err = db.run(ctx, func(h pgurl.Handle, slots *compat.Slots) error {
		if err := checkKeyLength(ctx, h, *f.schema, group); err != nil {
			return err
		}
		known, err := groupstatus.GroupKnown(ctx, h, *f.schema, group)
		if err != nil {
			return err
		}
		if !known {
			msg := fmt.Sprintf("group %s has no job, no slot and no override in schema %s: is the name right? A group is a job class (as stored in the queue's class column) or class::key", strconv.Quote(group), strconv.Quote(*f.schema))
			if !*force {
				return &exitError{code: 1, err: fmt.Errorf("%s; nothing was changed: pass --force to set it anyway (a group whose jobs are not enqueued yet)", msg)}
			}
			fmt.Fprintf(e.stderr, "warning: %s; setting it anyway (--force)\n", msg)
		}
		return slots.Overrides().SetLimit(ctx, group, *limit, *reason)
	})
	if err != nil {
		return f.explain(ctx, db, err)
	}
	j.res.Changed, j.res.Limit, j.res.Reason = true, limit, *reason
	// The override is written: say so before anything else can fail.
	fmt.Fprintf(e.stdout, "group %s: limit %d (override)", shown, *limit)
	if _, key := layout.SplitGroupName(group); *limit == 0 && key == "" {
		fmt.Fprintf(e.stdout, "; the class's keyless jobs (group %s) are no longer admitted or started, its keyed groups (%s::KEY) go on: 'migrate-unique concurrency pause %s' stops the whole class", shown, shown, shellArg(group))
	} else if *limit == 0 {
		fmt.Fprint(e.stdout, "; no job of this group (this class and key) is admitted or started")
	}
	var st compat.GroupStatus
	err = db.run(ctx, func(_ pgurl.Handle, slots *compat.Slots) (err error) {
		st, err = slots.Status(ctx, group)
		return err
	})
	if err != nil {
		fmt.Fprintln(e.stdout)
		fmt.Fprintf(e.stderr, "the override is written; reading the group's holders afterwards failed: %v\n", f.explain(ctx, db, err))
		return nil
	}
	j.res.HoldersOverLimit = &st.OverLimit
	if st.OverLimit > 0 {
		fmt.Fprintf(e.stdout, "; %d holder(s) over the new limit finish their jobs", st.OverLimit)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// checkGroupName rejects a group name no job can have (exit 2).
func checkGroupName(group string) error { return usageError(groupstatus.CheckGroupName(group)) }

// checkKeyLength rejects a group whose key is longer than the key column of
// the queue tables in schema can hold (exit 2).
func checkKeyLength(ctx context.Context, conn pgurl.Handle, schema, group string) error {
	return usageError(groupstatus.CheckKeyLength(ctx, conn, schema, group))
}

// usageError makes a bad name an exit-2 error.
func usageError(err error) error {
	var bad *groupstatus.BadNameError
	if errors.As(err, &bad) {
		return &exitError{code: 2, err: err}
	}
	return err
}

// shellArg quotes s for a command line the operator may copy.
func shellArg(s string) string { return groupstatus.ShellArg(s) }
