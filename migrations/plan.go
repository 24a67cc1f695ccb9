package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/migrate-unique/migrate-unique/layout"
)

// PlannedStep is one step Up would run.
type PlannedStep struct {
	// Number is the step's 1-based position.
	Number int
	// Name says what the step does; SQL is exactly what it runs.
	Name, SQL string
	// Table is the table(s) the step touches and Lock the lock it takes.
	Table, Lock string
	// Rows and Bytes are the size of the queue tables it touches (row
	// count from the planner's estimate).
	Rows, Bytes int64
	// RowsUnknown says that a table it touches was never analysed, so Rows
	// leaves its rows out (the planner has no estimate).
	RowsUnknown bool
	// Skip says why the step has nothing to do, or "".
	Skip string
	// Concurrent steps run outside any transaction (CONCURRENTLY).
	Concurrent bool
	// Transaction steps run in one transaction each, with SET LOCAL
	// lock_timeout, retried after a lock timeout; a step that is neither
	// (ANALYZE) is one statement on its own, outside any transaction.
	Transaction bool
	// GrowsWithTable says the step's duration grows with the size of the
	// table it touches (an index build reads all of it). BlocksWriters says
	// it takes, at some moment, a lock the queue's writers wait for (ACCESS
	// EXCLUSIVE; on a partitioned table, the moments of ON ONLY and ATTACH
	// PARTITION), always under a bounded lock wait. No step does both for
	// one stretch: whatever a step that blocks writers must know about the
	// rows, it learns before taking its lock (down's probe index), so that
	// it holds the lock for a time independent of the table's size.
	GrowsWithTable, BlocksWriters bool
	// DeletesIndexFiles marks a step that drops, under ACCESS EXCLUSIVE, an
	// index PostgreSQL cannot drop online (a unique constraint's, or an
	// index on a partitioned table; docs/migration.md, "Indexes with no
	// online drop"). Its lock covers catalog work only: PostgreSQL deletes
	// the index's files at commit after releasing the locks, so writers
	// wait for a time independent of the index's size, and the step's
	// commit returns after a time that grows with it (GrowsWithTable is
	// set; the size is in Lock).
	DeletesIndexFiles bool
	// Phase is, for up, "expand" for a step the old application version
	// lives with (up --expand runs those) and "complete" for the cutover
	// and what only follows it; "" for down and up --contract.
	Phase string
}

// PlanResult is what Plan found and what Up (PlanDown: Down) would do.
type PlanResult struct {
	// State is the layout's current state.
	State State
	// Findings are the preflight's findings; a fatal one means Up would
	// refuse.
	Findings []Finding
	// Steps lists what Up would run, in order (empty when migrated without
	// drift; a drifted layout lists the steps that repair it).
	Steps []PlannedStep
}

// Plan inspects the database read-only and returns the preflight findings
// and each step of Up with its SQL, lock level and table size. It changes
// nothing. A fatal preflight finding is returned in PlanResult.Findings, not
// as an error; a layout that is not found is a *NotFoundError.
func Plan(ctx context.Context, databaseURL string, l layout.Layout) (*PlanResult, error) {
	return PlanWith(ctx, databaseURL, l, Options{})
}

// PlanWith is Plan under the options Up would run with: the preflight is
// Up's (LongTransaction), and the steps' SQL is what Up runs
// (LockTimeout), so a fatal finding here is a refusal of Up with the same
// options.
func PlanWith(ctx context.Context, databaseURL string, l layout.Layout, opts Options) (*PlanResult, error) {
	return plan(ctx, databaseURL, l, opts, "up")
}

// PlanDown is Plan for Down: its preflight and its duplicate scan under the
// options Down would run with (a group that breaks the saved unique rule
// is a fatal finding of kind "duplicates"), and each step of Down. It
// changes nothing.
func PlanDown(ctx context.Context, databaseURL string, l layout.Layout, opts Options) (*PlanResult, error) {
	return plan(ctx, databaseURL, l, opts, "down")
}

func plan(ctx context.Context, databaseURL string, l layout.Layout, opts Options, direction string) (*PlanResult, error) {
	r, err := newRunner(ctx, databaseURL, l, opts, "plan")
	if err != nil {
		return nil, err
	}
	defer r.close()
	res := &PlanResult{}
	if r.pooler != nil {
		res.Findings = append(res.Findings, Finding{Fatal: true, Kind: "pooler", Message: r.pooler.Error(), Action: "connect directly to PostgreSQL"})
	}
	if h, err := r.holder(ctx); err != nil {
		return nil, err
	} else if h != nil {
		res.Findings = append(res.Findings, Finding{Fatal: true, Kind: "run_lock", Object: fmt.Sprintf("pid %d", h.PID), Message: h.Error()})
	}
	in, findings, err := r.preflight(ctx, direction)
	if pe, ok := err.(*PreflightError); ok {
		res.Findings = append(res.Findings, pe.Findings...)
		if in, err = r.inspect(ctx); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	} else {
		res.Findings = append(res.Findings, findings...)
	}
	res.State = in.state()
	var steps []step
	if direction == "down" {
		var more []Finding
		more, steps, err = r.downWork(ctx, in)
		res.Findings = append(res.Findings, more...)
		var de *DuplicatesError
		var pe *PreflightError
		if errors.As(err, &pe) {
			err = nil // its findings are in more
		}
		if errors.As(err, &de) {
			res.Findings = append(res.Findings, Finding{Fatal: true, Kind: "duplicates", Message: de.Error(), Action: "let those jobs finish (down --drain sets those groups to limit 1 and waits for them) or delete them yourself; down never deletes a job"})
			err = nil
		}
		if err != nil {
			return nil, err
		}
	} else {
		if res.State == Migrated && len(in.drift()) == 0 && !r.opts.Contract {
			return res, nil
		}
		if r.opts.Contract {
			steps, err = r.contractSteps(in)
		} else {
			steps, err = upSteps(in, r.opts)
		}
		if err != nil {
			return nil, err
		}
	}
	for i, s := range steps {
		ps := PlannedStep{Number: i + 1, Name: s.name, SQL: strings.TrimSpace(s.sql), Table: s.table, Lock: s.lock, Skip: s.skip, Concurrent: s.kind == stepConcurrent, Transaction: s.kind == stepTx,
			GrowsWithTable: s.grows, BlocksWriters: s.blocksWriters(), DeletesIndexFiles: s.dropsFiles}
		if direction == "up" && !r.opts.Contract {
			ps.Phase = "expand"
			if s.phase == phaseComplete || s.phase >= phaseAnalyze && !expanding(in, r.opts) {
				ps.Phase = completePhase
			}
		}
		for _, t := range in.tables {
			if strings.Contains(s.table, r.l.Table(t.name)) {
				ps.Rows += t.rows
				ps.Bytes += t.bytes
				ps.RowsUnknown = ps.RowsUnknown || t.rowsUnknown
			}
		}
		res.Steps = append(res.Steps, ps)
	}
	return res, nil
}
