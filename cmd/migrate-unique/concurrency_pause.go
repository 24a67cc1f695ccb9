package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
)

const concurrencyPauseUsage = `concurrency pause CLASS [--reason TEXT] [--database URL] [--schema S] [--json]

Stops a whole job class at once: its keyless group (CLASS) and every keyed
group (CLASS::KEY, whatever the key), in admission (an enqueue is refused
with the limit result, limit 0) and in slot acquisition (a worker gets no
slot and reschedules the job). Jobs that hold a slot finish; pending jobs
stay queued. Groups' own overrides are kept and apply again after
'concurrency resume CLASS'.`

func runConcurrencyPause(ctx context.Context, e *env, args []string) (err error) {
	f := newConcurrencyFlags(e, "pause", concurrencyPauseUsage)
	reason := f.fs.String("reason", "", "a note kept with the pause, shown by status")
	j := newJSONChange(f.fs, "pause")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	e = j.begin(e)
	defer func() { err = j.finish(err) }()
	class := pos[0]
	if err := checkClassName(class); err != nil {
		return err
	}
	if strings.IndexFunc(*reason, isControl) >= 0 || !utf8.ValidString(*reason) {
		return &exitError{code: 2, err: fmt.Errorf("--reason %s contains a control character or invalid UTF-8; give one line of plain text", strconv.Quote(*reason))}
	}
	db, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	var already bool
	err = db.run(ctx, func(_ pgurl.Handle, slots *compat.Slots) (err error) {
		already, err = slots.Overrides().PauseClass(ctx, class, *reason)
		return err
	})
	if err != nil {
		return f.explain(ctx, db, err)
	}
	j.res.Class, j.res.Changed, j.res.Reason = class, true, *reason
	shown := escapeName(class)
	verb := "paused:"
	if already {
		verb = "was already paused (reason updated):"
	}
	fmt.Fprintf(e.stdout, "class %s %s no job of the class is admitted or started: neither its keyless jobs (group %s) nor any keyed group (%s::KEY, every key); jobs holding a slot finish, pending jobs stay queued; 'migrate-unique concurrency resume %s' lifts it\n",
		shown, verb, shown, shown, shellArg(class))
	return nil
}

const concurrencyResumeUsage = `concurrency resume CLASS [--database URL] [--schema S] [--json]

Lifts a class pause: the class's groups are admitted and started again
under their own limits (overrides and the code's).`

func runConcurrencyResume(ctx context.Context, e *env, args []string) (err error) {
	f := newConcurrencyFlags(e, "resume", concurrencyResumeUsage)
	j := newJSONChange(f.fs, "resume")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	e = j.begin(e)
	defer func() { err = j.finish(err) }()
	class := pos[0]
	if err := checkClassName(class); err != nil {
		return err
	}
	db, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer db.close()
	var had bool
	err = db.run(ctx, func(_ pgurl.Handle, slots *compat.Slots) (err error) {
		had, err = slots.Overrides().ResumeClass(ctx, class)
		return err
	})
	if err != nil {
		return f.explain(ctx, db, err)
	}
	j.res.Class, j.res.Changed = class, had
	if !had {
		fmt.Fprintf(e.stdout, "class %s was not paused; nothing changed\n", escapeName(class))
		return nil
	}
	fmt.Fprintf(e.stdout, "class %s resumed: its groups are admitted and started again under their own limits\n", escapeName(class))
	return nil
}

// checkClassName refuses what cannot be a class: a group name, or a name
// no group can have (exit 2).
func checkClassName(class string) error { return usageError(groupstatus.CheckClassName(class)) }

// pausedNote is what status shows for a group of a paused class.
func pausedNote(g compat.GroupStatus) string {
	s := "class paused"
	if g.PauseReason != "" {
		s += ": " + g.PauseReason
	}
	return s
}
