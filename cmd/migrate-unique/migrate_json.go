package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
)

// The --json output of plan, up, down and status: one object on stdout per
// command, documented field by field in docs/migration.md. Fields are only
// ever added; lists are [] when empty, never null.

// layoutJSON is the layout a command worked on.
type layoutJSON struct {
	// Tables are the quoted, schema-qualified tables.
	Tables []string `json:"tables"`
	// Flags are the layout flags that select it ("" for plain-jobs' own).
	Flags string `json:"flags"`
}

func layoutJSONOf(l layout.Resolved) layoutJSON {
	out := layoutJSON{Tables: []string{}, Flags: l.Args()}
	for _, t := range l.Tables() {
		out.Tables = append(out.Tables, l.Table(t))
	}
	return out
}

func findingsOf(fs []migrations.Finding) []migrations.Finding {
	if fs == nil {
		return []migrations.Finding{}
	}
	return fs
}

// planJSON is plan --json.
type planJSON struct {
	Command  string     `json:"command"`
	Database string     `json:"database"`
	Layout   layoutJSON `json:"layout"`
	// Direction is "up", or "down" with --down.
	Direction string `json:"direction"`
	State     string `json:"state"`
	// WouldRefuse is true when a finding is fatal: the run with the same
	// flags would refuse (the exit status is then 1).
	WouldRefuse bool                 `json:"would_refuse"`
	Findings    []migrations.Finding `json:"findings"`
	Steps       []planStepJSON       `json:"steps"`
}

type planStepJSON struct {
	Number int    `json:"number"`
	Name   string `json:"name"`
	Table  string `json:"table"`
	Lock   string `json:"lock"`
	// Execution is "concurrent" (CONCURRENTLY, outside any transaction),
	// "transaction" (one transaction, lock_timeout bounded, retried) or
	// "statement" (one statement outside any transaction).
	Execution string `json:"execution"`
	// Rows is the planner's estimate for the tables the step touches;
	// RowsUnknown is true when one of them was never analysed.
	Rows        int64  `json:"rows"`
	RowsUnknown bool   `json:"rows_unknown"`
	Bytes       int64  `json:"bytes"`
	Skip        string `json:"skip"`
	SQL         string `json:"sql"`
	// GrowsWithTable: the step's time grows with the table's size;
	// BlocksWriters: it takes, for a moment independent of that size, a
	// lock writers wait for.
	GrowsWithTable bool `json:"grows_with_table"`
	BlocksWriters  bool `json:"blocks_writers"`
	// DeletesIndexFiles: the step drops an index that has no online drop;
	// writers wait only for its catalog work, and its commit returns after
	// PostgreSQL has deleted the index's files, once the locks are released
	// (docs/migration.md, "Indexes with no online drop").
	DeletesIndexFiles bool `json:"deletes_index_files"`
	// Phase is "expand" or "complete" for a step of up (docs/migration.md,
	// "Rolling deploys"), "" for down and up --contract.
	Phase string `json:"phase"`
}

func planJSONOf(direction, url string, l layout.Resolved, p *migrations.PlanResult, fatal bool) planJSON {
	out := planJSON{Command: "plan", Database: pgurl.Describe(url), Layout: layoutJSONOf(l), Direction: direction, State: string(p.State),
		WouldRefuse: fatal, Findings: findingsOf(p.Findings), Steps: []planStepJSON{}}
	for _, s := range p.Steps {
		ex := "statement"
		switch {
		case s.Concurrent:
			ex = "concurrent"
		case s.Transaction:
			ex = "transaction"
		}
		sql := s.SQL
		if s.Skip != "" {
			sql = ""
		}
		out.Steps = append(out.Steps, planStepJSON{Number: s.Number, Name: s.Name, Table: s.Table, Lock: s.Lock, Execution: ex,
			Rows: s.Rows, RowsUnknown: s.RowsUnknown, Bytes: s.Bytes, Skip: s.Skip, SQL: sql, Phase: s.Phase,
			GrowsWithTable: s.GrowsWithTable, BlocksWriters: s.BlocksWriters, DeletesIndexFiles: s.DeletesIndexFiles})
	}
	return out
}

// millis renders a duration as milliseconds.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// runJSON is up --json and down --json.
type runJSON struct {
	Command  string     `json:"command"`
	Database string     `json:"database"`
	Layout   layoutJSON `json:"layout"`
	// OK is false when the run failed or refused; Error is then the same
	// message stderr shows, and Duplicates lists the groups that stopped a
	// down.
	OK         bool                        `json:"ok"`
	Error      string                      `json:"error"`
	Duplicates []migrations.DuplicateGroup `json:"duplicates"`
	// Before and After are the layout's states around the run ("" when the
	// run stopped before reading them).
	Before string `json:"before"`
	After  string `json:"after"`
	// DurationMS is the run's wall time; LongestLockMS the longest ACCESS
	// EXCLUSIVE hold, in LongestLockStep.
	DurationMS      float64                  `json:"duration_ms"`
	LongestLockMS   float64                  `json:"longest_lock_ms"`
	LongestLockStep string                   `json:"longest_lock_step"`
	Findings        []migrations.Finding     `json:"findings"`
	Steps           []runStepJSON            `json:"steps"`
	Saved           []migrations.SavedUnique `json:"saved"`
	Kept            []migrations.KeptObject  `json:"kept"`
}

type runStepJSON struct {
	Number int    `json:"number"`
	Name   string `json:"name"`
	Table  string `json:"table"`
	Lock   string `json:"lock"`
	// Skipped says why the step had nothing to do, or "".
	Skipped    string  `json:"skipped"`
	Attempts   int     `json:"attempts"`
	DurationMS float64 `json:"duration_ms"`
	LockHeldMS float64 `json:"lock_held_ms"`
	// CommitMS is, for a step that drops an index with no online drop, how
	// long its COMMIT took (PostgreSQL deletes the index's files there,
	// after releasing the locks; lock_held_ms stops at the COMMIT); 0
	// otherwise.
	CommitMS float64 `json:"commit_ms"`
}

func stepJSONOf(s migrations.StepResult) runStepJSON {
	return runStepJSON{Number: s.Number, Name: s.Name, Table: s.Table, Lock: s.Lock, Skipped: s.Skipped, Attempts: s.Attempts,
		DurationMS: millis(s.Duration), LockHeldMS: millis(s.LockHeld), CommitMS: millis(s.Commit)}
}

func runJSONOf(command, url string, l layout.Resolved, rep *migrations.Report, err error) runJSON {
	out := runJSON{Command: command, Database: pgurl.Describe(url), Layout: layoutJSONOf(l), OK: err == nil,
		Duplicates: []migrations.DuplicateGroup{}, Findings: []migrations.Finding{}, Steps: []runStepJSON{},
		Saved: []migrations.SavedUnique{}, Kept: []migrations.KeptObject{}}
	if err != nil {
		out.Error = err.Error()
		var de *migrations.DuplicatesError
		if errors.As(err, &de) {
			out.Duplicates = de.Groups
		}
		var pe *migrations.PreflightError
		if errors.As(err, &pe) {
			out.Findings = findingsOf(pe.Findings)
		}
	}
	if rep == nil {
		return out
	}
	out.Before, out.After = string(rep.Before), string(rep.After)
	out.DurationMS, out.LongestLockMS, out.LongestLockStep = millis(rep.Duration), millis(rep.LongestLock), rep.LongestLockStep
	if len(rep.Findings) > 0 {
		out.Findings = rep.Findings
	}
	for _, s := range rep.Steps {
		out.Steps = append(out.Steps, stepJSONOf(s))
	}
	if rep.Saved != nil {
		out.Saved = rep.Saved
	}
	if rep.KeptObjects != nil {
		out.Kept = rep.KeptObjects
	}
	return out
}

// statusJSONResult is status --json.
type statusJSONResult struct {
	Command  string     `json:"command"`
	Database string     `json:"database"`
	Layout   layoutJSON `json:"layout"`
	State    string     `json:"state"`
	// ToolVersion is this binary's version; RecordedVersion and
	// RecordedAt the version that last wrote the layout's row ("" and null
	// when none).
	ToolVersion     string     `json:"tool_version"`
	RecordedVersion string     `json:"recorded_version"`
	RecordedAt      *time.Time `json:"recorded_at"`
	// Direction ("up", "down" or "") is a run that recorded its intent and
	// did not finish; Stopped says where; Next what to run.
	Direction string   `json:"direction"`
	Stopped   string   `json:"stopped"`
	Next      string   `json:"next"`
	Drift     []string `json:"drift"`
	// RunLock is the session holding the layout's run lock, or null.
	RunLock *runLockJSON `json:"run_lock"`
	// Pooler is set when the connection goes through a pooler, or null.
	Pooler         *poolerJSON              `json:"pooler"`
	Tables         []statusTableJSON        `json:"tables"`
	Saved          []migrations.SavedUnique `json:"saved"`
	InvalidIndexes []string                 `json:"invalid_indexes"`
	// Kept is what an earlier down kept on a rolled-back layout.
	Kept []migrations.KeptObject `json:"kept"`
	// UpRefusals lists why up would refuse (what depends on the key
	// column); plan shows them as findings.
	UpRefusals []string `json:"up_refusals"`
	// VersionSchema is the version schema up --expand made, or null.
	VersionSchema *string `json:"version_schema"`
}

type runLockJSON struct {
	PID         int     `json:"pid"`
	Application string  `json:"application"`
	ClientPID   int     `json:"client_pid"`
	ClientHost  string  `json:"client_host"`
	State       string  `json:"state"`
	Query       string  `json:"query"`
	AgeMS       float64 `json:"age_ms"`
	Orphaned    bool    `json:"orphaned"`
	Message     string  `json:"message"`
}

type poolerJSON struct {
	ServerPID     uint32 `json:"server_pid"`
	ConnectionPID uint32 `json:"connection_pid"`
	Message       string `json:"message"`
}

type statusTableJSON struct {
	Table     string `json:"table"`
	KeyColumn string `json:"key_column"`
	// Rows is the planner's estimate; RowsUnknown is true (and Rows 0)
	// when the table was never analysed, as in plan's steps.
	Rows        int64 `json:"rows"`
	RowsUnknown bool  `json:"rows_unknown"`
}

func statusJSONOf(url string, l layout.Resolved, st *migrations.StatusResult) statusJSONResult {
	out := statusJSONResult{Command: "status", Database: pgurl.Describe(url), Layout: layoutJSONOf(l), State: string(st.State),
		ToolVersion: st.ToolVersion, RecordedVersion: st.RecordedVersion, Direction: st.Direction, Stopped: st.Stopped, Next: st.Next,
		Drift: []string{}, Tables: []statusTableJSON{}, Saved: []migrations.SavedUnique{}, InvalidIndexes: []string{}, Kept: []migrations.KeptObject{}}
	if st.Kept != nil {
		out.Kept = st.Kept
	}
	out.UpRefusals = []string{}
	if st.UpRefusals != nil {
		out.UpRefusals = st.UpRefusals
	}
	if !st.RecordedAt.IsZero() {
		at := st.RecordedAt.UTC()
		out.RecordedAt = &at
	}
	if st.Drift != nil {
		out.Drift = st.Drift
	}
	if h := st.Run; h != nil {
		out.RunLock = &runLockJSON{PID: h.PID, Application: h.Application, ClientPID: h.ClientPID, ClientHost: h.ClientHost, State: h.State,
			Query: h.Query, AgeMS: millis(h.Age), Orphaned: h.Orphaned, Message: h.Error()}
	}
	if p := st.Pooler; p != nil {
		out.Pooler = &poolerJSON{ServerPID: p.ServerPID, ConnectionPID: p.ConnectionPID, Message: p.Error()}
	}
	for _, t := range st.Tables {
		out.Tables = append(out.Tables, statusTableJSON{Table: t.Table, KeyColumn: t.KeyColumn, Rows: t.Rows, RowsUnknown: t.RowsUnknown})
	}
	if st.Saved != nil {
		out.Saved = st.Saved
	}
	if st.VersionSchema != "" {
		out.VersionSchema = &st.VersionSchema
	}
	if st.InvalidIndexes != nil {
		out.InvalidIndexes = st.InvalidIndexes
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// progressEvent is one JSON line on stderr during up --json and down
// --json: "step" after each step, "retry" before a step is tried again,
// "progress" for an index build.
type progressEvent struct {
	Event    string               `json:"event"`
	Step     *runStepJSON         `json:"step,omitempty"`
	Retry    *retryJSON           `json:"retry,omitempty"`
	Progress *migrations.Progress `json:"progress,omitempty"`
}

type retryJSON struct {
	Step    string  `json:"step"`
	Attempt int     `json:"attempt"`
	WaitMS  float64 `json:"wait_ms"`
	Error   string  `json:"error"`
}

// jsonProgress makes o report steps, retries and index build progress as
// JSON lines on w.
func jsonProgress(w io.Writer, o *migrations.Options) {
	var mu sync.Mutex
	emit := func(ev progressEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = writeJSON(w, ev)
	}
	o.OnStep = func(s migrations.StepResult) {
		sj := stepJSONOf(s)
		emit(progressEvent{Event: "step", Step: &sj})
	}
	o.OnRetry = func(step string, attempt int, wait time.Duration, err error) {
		emit(progressEvent{Event: "retry", Retry: &retryJSON{Step: step, Attempt: attempt, WaitMS: millis(wait), Error: err.Error()}})
	}
	o.OnProgress = func(p migrations.Progress) {
		emit(progressEvent{Event: "progress", Progress: &p})
	}
}
