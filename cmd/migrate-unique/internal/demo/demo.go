// Package demo runs `migrate-unique demo`: the whole migration story in one
// command, on a real PostgreSQL database, narrated step by step.
//
//  1. a legacy plain-jobs queue with realistic rows;
//  2. plan, then up online, with the report's figures;
//  3. enqueues through the compat runtime (a legacy UniqueKey job, a
//     class-wide limit, a per-key limit of 3, a retry, a scheduled key);
//  4. jobs run under slot leases, the group's concurrency status, and a
//     limit override of 0 that blocks admission and execution;
//  5. the rewrite of a small embedded job module, as a diff;
//  6. down: refused while a group breaks the old unique rule, then a clean
//     round trip once the demo's own extra jobs are gone.
//
// With no database URL it starts a throwaway server through the same harness
// the tests use (internal/testdb) and removes it afterwards.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// DefaultRows is how many pending jobs step 1 creates when Options.Rows is
// not set: enough that up's index build shows progress, few enough that the
// whole demo takes well under a minute on a small machine.
const DefaultRows = 200_000

// Options configures Run.
type Options struct {
	// DatabaseURL is an empty database to run the demo in. "" starts a
	// throwaway PostgreSQL server (or, without server binaries, creates a
	// fresh database on the server the tests would use) and removes it
	// afterwards.
	DatabaseURL string
	// Rows is the number of pending jobs of the legacy queue (plus a tenth
	// as many running and a fifth as many finished ones). 0 means
	// DefaultRows; negative is an error.
	Rows int
	// Keep leaves the throwaway server (or database) in place and prints its
	// URL.
	Keep bool
	// Out receives the narration. nil discards it.
	Out io.Writer
	// Terminal redraws up's progress bar in place instead of printing lines.
	Terminal bool
	// PrintStatus renders concurrency groups as `migrate-unique concurrency
	// status` does; nil prints one line per group.
	PrintStatus func(w io.Writer, groups []compat.GroupStatus)
}

// StepError says which step of the demo failed.
type StepError struct {
	// Step is the step's number, 1 to 6; Title its heading.
	Step  int
	Title string
	Err   error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("step %d (%s) failed: %v", e.Step, e.Title, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Run runs the demo. It returns nil only when every step did what it shows;
// otherwise the error joins a *StepError per failed step.
func Run(ctx context.Context, o Options) (err error) {
	if o.Rows < 0 {
		return fmt.Errorf("rows %d: give 0 (the default, %d) or more", o.Rows, DefaultRows)
	}
	if o.Rows == 0 {
		o.Rows = DefaultRows
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.PrintStatus == nil {
		o.PrintStatus = printStatusLines
	}
	start := time.Now()
	d := &demo{o: o, out: o.Out, l: legacy.PlainJobs.Resolved}
	fmt.Fprintf(d.out, "migrate-unique demo: a legacy plain-jobs queue migrated to concurrency keys and limits, and back.\n\n")

	db, err := openDatabase(ctx, o.DatabaseURL, testdb.FromEnvironment(), d.out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.close(context.WithoutCancel(ctx), o.Keep, d.out); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	d.url = db.url

	cfg, err := pgxpool.ParseConfig(d.url)
	if err != nil {
		return pgurl.RedactError(d.url, err)
	}
	cfg.MaxConns = 8
	pgurl.CancelOnDone(&cfg.ConnConfig.Config)
	pgurl.Pin(&cfg.ConnConfig.Config)
	d.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return pgurl.RedactError(d.url, err)
	}
	defer d.pool.Close()

	steps := []struct {
		title string
		run   func(context.Context) error
		// alone: the step depends on no earlier step and no later step
		// depends on it, so the demo goes on when it fails.
		alone bool
	}{
		{"a legacy plain-jobs queue", d.legacyQueue, false},
		{"plan, then up (online)", d.planAndUp, false},
		{"enqueue through the compat runtime", d.enqueue, false},
		{"run jobs under slot leases", d.runUnderSlots, false},
		{"rewrite the job code", d.rewriteCode, true},
		{"down, and the round trip", d.down, false},
	}
	var failed []error
	for i, s := range steps {
		fmt.Fprintf(d.out, "\nStep %d/%d: %s\n", i+1, len(steps), s.title)
		stepStart := time.Now()
		if err := s.run(ctx); err != nil {
			err = pgurl.RedactError(d.url, err)
			fmt.Fprintf(d.out, "  FAILED: %v\n", err)
			failed = append(failed, &StepError{Step: i + 1, Title: s.title, Err: err})
			if !s.alone {
				break
			}
			continue
		}
		fmt.Fprintf(d.out, "  (step %d took %s)\n", i+1, round(time.Since(stepStart)))
	}
	if len(failed) > 0 {
		fmt.Fprintf(d.out, "\ndemo FAILED after %s\n", round(time.Since(start)))
		if o.DatabaseURL == "" && !o.Keep {
			fmt.Fprintf(d.out, "(run it again with --keep to look at the database afterwards)\n")
		}
		return errors.Join(failed...)
	}
	fmt.Fprintf(d.out, "\ndemo finished in %s: every step did what it shows.\n", round(time.Since(start)))
	return nil
}

// demo is the state the steps share.
type demo struct {
	o    Options
	out  io.Writer
	url  string
	pool *pgxpool.Pool
	l    layout.Resolved

	// step 1
	seedRows   int64  // rows of the three tables after seeding
	uniqueRule string // the old unique index's definition
	// step 2 on
	client *compat.Client
	// step 3
	demoRows int64       // rows the demo added to the queue and that are still there
	perKey   []perKeyJob // the per-key group's admitted jobs
}

// perKeyJob is one admitted job of the per-key limit group.
type perKeyJob struct {
	id   int64
	uuid string
}

// indent prefixes every line written through it, for output of the tools
// the demo runs. It keeps a carriage return's redraw indented too.
type indent struct {
	w       io.Writer
	prefix  string
	midLine bool
}

func (iw *indent) Write(p []byte) (int, error) {
	var b strings.Builder
	for _, c := range string(p) {
		if !iw.midLine && c != '\n' && c != '\r' {
			b.WriteString(iw.prefix)
			iw.midLine = true
		}
		b.WriteRune(c)
		if c == '\n' || c == '\r' {
			iw.midLine = false
		}
	}
	if _, err := io.WriteString(iw.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// round shortens a duration for narration.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d
}

// printStatusLines is the default of Options.PrintStatus.
func printStatusLines(w io.Writer, groups []compat.GroupStatus) {
	for _, g := range groups {
		limit := "none"
		if g.HasLimit {
			limit = fmt.Sprint(g.Limit)
			if g.Override {
				limit += " (override)"
			}
		}
		fmt.Fprintf(w, "%s: limit %s, %d active\n", g.Group, limit, g.Active)
		for _, s := range g.Slots {
			if s.Held {
				fmt.Fprintf(w, "  slot %d: job %s on %s, token %d\n", s.Slot, s.JobID, s.WorkerID, s.Token)
			}
		}
	}
}
