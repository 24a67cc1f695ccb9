package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Names in plain-jobs' schema the demo refers to.
const (
	uniqueIndex = "plainjobs_jobrequest_unique_job_class_key"
	// countingIndex is plain-jobs' own (job_class, unique_key) index on the
	// requests table, which up would rename to plain-jobs 0007's name.
	countingIndex = "job_request_class_unique_key"
)

// legacyQueue is step 1.
func (d *demo) legacyQueue(ctx context.Context) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	start := time.Now()
	// The fixture is plain-jobs' own DDL, unqualified as its migrations
	// write it: it runs as the application would, on the queue's schema,
	// not on the tool's pinned search_path (which starts at pg_catalog).
	if _, err := conn.Exec(ctx, "SELECT pg_catalog.set_config('search_path', $1::pg_catalog.text, false)", pgx.Identifier{d.l.Schema}.Sanitize()); err != nil {
		return fmt.Errorf("set the application's search_path: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_catalog.set_config('search_path', $1::pg_catalog.text, false)", pgurl.SearchPath); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if err := legacy.PlainJobs.Load(ctx, conn.Conn(), d.o.Rows); err != nil {
		return err
	}
	// plain-jobs ships an index up renames at the cutover; without it, up
	// builds it CONCURRENTLY, which is what a demo should let you watch.
	if _, err := conn.Exec(ctx, "DROP INDEX "+d.l.Table(countingIndex)); err != nil {
		return fmt.Errorf("drop %s: %w", countingIndex, err)
	}
	counts, err := d.countRows(ctx)
	if err != nil {
		return err
	}
	d.seedRows = counts[0] + counts[1] + counts[2]
	if err := conn.QueryRow(ctx, "SELECT pg_get_indexdef(to_regclass($1))", d.l.Table(uniqueIndex)).Scan(&d.uniqueRule); err != nil {
		return fmt.Errorf("read the unique rule %s: %w", uniqueIndex, err)
	}
	fmt.Fprintf(d.out, "  created plain-jobs' tables with %d pending, %d running and %d finished jobs in %s\n",
		counts[0], counts[1], counts[2], round(time.Since(start)))
	fmt.Fprintf(d.out, "  the old rule, one pending job per key: %s\n", d.uniqueRule)
	fmt.Fprintf(d.out, "  dropped plain-jobs' own index %s so that up has one to build (on your queue up renames it to plain-jobs 0.38's job_request_concurrency_key)\n", countingIndex)
	return nil
}

// countRows counts the rows of requests, processes and results.
func (d *demo) countRows(ctx context.Context) ([3]int64, error) {
	var n [3]int64
	err := d.pool.QueryRow(ctx, fmt.Sprintf("SELECT (SELECT count(*) FROM %s), (SELECT count(*) FROM %s), (SELECT count(*) FROM %s)",
		d.l.Table(d.l.RequestsTable), d.l.Table(d.l.ProcessesTable), d.l.Table(d.l.ResultsTable))).Scan(&n[0], &n[1], &n[2])
	if err != nil {
		return n, fmt.Errorf("count the queue's rows: %w", err)
	}
	return n, nil
}

// planAndUp is step 2.
func (d *demo) planAndUp(ctx context.Context) error {
	p, err := migrations.Plan(ctx, d.url, d.l.Layout)
	if err != nil {
		return err
	}
	todo := 0
	for _, s := range p.Steps {
		if s.Skip == "" {
			todo++
		}
	}
	fmt.Fprintf(d.out, "  plan: state %s; up would run %d of %d steps:\n", p.State, todo, len(p.Steps))
	for _, s := range p.Steps {
		line := fmt.Sprintf("    %d. %s: %s", s.Number, s.Name, s.Lock)
		if s.Rows > 0 {
			line += fmt.Sprintf(", ~%d rows", s.Rows)
		}
		if s.Skip != "" {
			line += " (skipped: " + s.Skip + ")"
		}
		fmt.Fprintln(d.out, line)
	}
	for _, f := range p.Findings {
		if f.Fatal {
			return fmt.Errorf("plan: up would refuse: %s", f.Message)
		}
	}
	if p.State != migrations.Legacy {
		return fmt.Errorf("plan: state %s, want %s", p.State, migrations.Legacy)
	}

	fmt.Fprintf(d.out, "  up:\n")
	out := &stepLines{w: &indent{w: d.out, prefix: "    "}}
	rep, err := migrations.Up(ctx, d.url, d.l.Layout, migrations.Options{Out: out, Terminal: d.o.Terminal, ProgressEvery: 250 * time.Millisecond})
	out.flush()
	if err != nil {
		return err
	}
	if rep.After != migrations.Migrated {
		return fmt.Errorf("up finished in state %s", rep.After)
	}
	counts, err := d.countRows(ctx)
	if err != nil {
		return err
	}
	after := counts[0] + counts[1] + counts[2]
	fmt.Fprintf(d.out, "  figures from up's report: %s in all, longest lock %s (%s)\n", round(rep.Duration), round(rep.LongestLock), rep.LongestLockStep)
	fmt.Fprintf(d.out, "  rows before and after: %d and %d\n", d.seedRows, after)
	if after != d.seedRows {
		return fmt.Errorf("up changed the number of rows from %d to %d", d.seedRows, after)
	}
	d.client, err = compat.NewClient(compat.Pgx(d.pool), d.l.Layout)
	return err
}

// stepLines passes up's output through, without the line each step prints
// as it starts (its "done" line follows).
type stepLines struct {
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

func (s *stepLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := strings.IndexAny(string(s.buf), "\n\r")
		if i < 0 {
			return len(p), nil
		}
		line := string(s.buf[:i+1])
		s.buf = s.buf[i+1:]
		if strings.HasSuffix(line, " ...\n") {
			continue
		}
		if _, err := io.WriteString(s.w, line); err != nil {
			return 0, err
		}
	}
}

func (s *stepLines) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		_, _ = s.w.Write(append(s.buf, '\n'))
		s.buf = nil
	}
}

// down is step 6.
func (d *demo) down(ctx context.Context) error {
	_, err := migrations.Down(ctx, d.url, d.l.Layout, migrations.Options{})
	var dup *migrations.DuplicatesError
	if !errors.As(err, &dup) {
		if err == nil {
			return errors.New("down did not refuse, though a group breaks the old unique rule")
		}
		return fmt.Errorf("down: want a refusal listing the duplicates, got: %w", err)
	}
	fmt.Fprintf(d.out, "  down refused before any change (it never deletes a job): a group breaks the old rule\n")
	group := layout.GroupName(perKeyClass, perKeyKey)
	found := false
	for _, g := range dup.Groups {
		fmt.Fprintf(d.out, "    group %s: %d pending jobs, the old rule (%s) allows 1\n", layout.GroupName(g.Class, g.Key), g.Count, g.Index)
		found = found || layout.GroupName(g.Class, g.Key) == group && g.Count == int64(len(d.perKey))
	}
	if !found {
		return fmt.Errorf("the refusal does not name group %s with %d jobs", group, len(d.perKey))
	}
	st, err := migrations.Status(ctx, d.url, d.l.Layout)
	if err != nil {
		return err
	}
	if st.State != migrations.Migrated {
		return fmt.Errorf("after the refusal the state is %s, want %s", st.State, migrations.Migrated)
	}

	// Only the demo's own extra jobs go, by id; the first one stays.
	var ids []int64
	for _, j := range d.perKey[1:] {
		ids = append(ids, j.id)
	}
	n, err := d.pool.Exec(ctx, "DELETE FROM "+d.l.Table(d.l.RequestsTable)+" WHERE id = ANY($1)", ids)
	if err != nil {
		return fmt.Errorf("delete the demo's extra jobs: %w", err)
	}
	if n.RowsAffected() != int64(len(ids)) {
		return fmt.Errorf("deleted %d of the demo's %d extra jobs", n.RowsAffected(), len(ids))
	}
	d.demoRows -= n.RowsAffected()
	fmt.Fprintf(d.out, "  deleted the demo's own %d extra jobs of %s (request ids %s)\n", len(ids), group, joinIDs(ids))

	rep, err := migrations.Down(ctx, d.url, d.l.Layout, migrations.Options{})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  %s\n", rep.Summary())
	for _, k := range rep.Kept {
		return fmt.Errorf("down kept %s", k)
	}
	if st, err = migrations.Status(ctx, d.url, d.l.Layout); err != nil {
		return err
	}
	var rule string
	if err := d.pool.QueryRow(ctx, "SELECT coalesce(pg_get_indexdef(to_regclass($1)), '')", d.l.Table(uniqueIndex)).Scan(&rule); err != nil {
		return err
	}
	counts, err := d.countRows(ctx)
	if err != nil {
		return err
	}
	total := counts[0] + counts[1] + counts[2]
	fmt.Fprintf(d.out, "  status: %s, key column %s\n", st.State, keyColumns(st))
	if rule != d.uniqueRule {
		return fmt.Errorf("the unique rule after down is %q, want the original %q", rule, d.uniqueRule)
	}
	fmt.Fprintf(d.out, "  the old unique rule is back, identical to the original\n")
	fmt.Fprintf(d.out, "  rows: %d = %d seeded + %d the demo added; none lost\n", total, d.seedRows, d.demoRows)
	if st.State != migrations.Legacy {
		return fmt.Errorf("state after down is %s, want %s", st.State, migrations.Legacy)
	}
	if total != d.seedRows+d.demoRows {
		return fmt.Errorf("the queue has %d rows, want %d", total, d.seedRows+d.demoRows)
	}
	return nil
}

// keyColumns lists the distinct key columns of the layout's tables.
func keyColumns(st *migrations.StatusResult) string {
	var cols []string
	for _, t := range st.Tables {
		if len(cols) == 0 || cols[len(cols)-1] != t.KeyColumn {
			cols = append(cols, t.KeyColumn)
		}
	}
	return strings.Join(cols, ", ")
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}
