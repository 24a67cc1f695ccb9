package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/admission"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
)

const benchAdmissionUsage = `bench admission [--database URL] [--rows 1000000] [--samples 200] [--json]

Measures the compat runtime's admission check in two scratch schemas of its
own (plain-jobs' real tables, migrated; created and dropped; no other table is
touched), next to baselines from the same run:
  - contention: 64 clients on separate connections race for one group with
    limit 5; over_admitted (jobs admitted beyond the limit) must be 0;
  - backlog: median enqueue-with-check latency with --rows active rows in the
    class (a tenth of them in the same key group) over the same on an empty
    table (backlog_latency_ratio), and the same ratio for the naive check,
    an advisory lock and an unbounded count(*) (naive_backlog_latency_ratio);
    the same two ratios with statistics taken before the backlog was loaded
    (backlog_latency_ratio_stale_stats), and for each pgx execution mode
    (cache_statement, cache_describe, describe_exec, exec, simple_protocol)
    and database/sql on fresh connections (backlog_latency_ratio_by_mode),
    with a quarter of --samples each;
  - throughput: enqueue-with-check of 4000 jobs by 16 clients over 1000 keys
    with limit 5, over a plain INSERT of the same rows
    (throughput_ratio_vs_insert);
  - batch throughput: EnqueueMany of 20,000 jobs in batches of 100 (each job
    of its own group in its batch, limit 5) by the same 16 clients, over one
    multi-row INSERT per batch of the same rows (batch_ratio_vs_insert_many).`

func runBenchAdmission(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench admission", benchAdmissionUsage)
	database := fs.String("database", "", databaseFlagUsage)
	rows := fs.Int("rows", 1_000_000, "active rows of the hot class in the backlog run (a tenth in the hot key group)")
	samples := fs.Int("samples", 200, "latency samples per case")
	asJSON := fs.Bool("json", false, "end with one JSON object of the figures")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &exitError{code: 2, err: fmt.Errorf("unexpected argument %q; every setting is a flag (see -h)", fs.Arg(0))}
	case *rows < 10:
		return &exitError{code: 2, err: fmt.Errorf("--rows %d: want at least 10", *rows)}
	case *samples < 1:
		return &exitError{code: 2, err: fmt.Errorf("--samples %d: want at least 1", *samples)}
	}
	url, err := pgurl.Resolve(*database)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	fmt.Fprintf(e.stdout, "admission benchmark on %s\n", pgurl.Describe(url))
	r, err := admission.Run(ctx, url, admission.Options{BacklogRows: *rows, Samples: *samples, Progress: e.stdout})
	if err != nil {
		return pgurl.RedactError(url, err)
	}
	fmt.Fprintf(e.stdout, "over_admitted %d (must be 0)\n", r.OverAdmitted)
	fmt.Fprintf(e.stdout, "backlog latency ratio %.2f (target <= 1.5); naive count(*) check %.2f\n", r.BacklogLatencyRatio, r.NaiveBacklogLatencyRatio)
	fmt.Fprintf(e.stdout, "  stale statistics: %.2f; naive %.2f\n", r.Stale.BacklogLatencyRatio, r.Stale.NaiveBacklogLatencyRatio)
	for _, m := range r.ByMode {
		fmt.Fprintf(e.stdout, "  %s: %.2f; naive %.2f\n", m.Mode, m.BacklogLatencyRatio, m.NaiveBacklogLatencyRatio)
	}
	fmt.Fprintf(e.stdout, "throughput %.0f/s with the check vs %.0f/s plain INSERT: ratio %.2f (target >= 0.6)\n", r.EnqueueCheckPerSecond, r.InsertPerSecond, r.ThroughputRatioVsInsert)
	fmt.Fprintf(e.stdout, "batch throughput %.0f jobs/s EnqueueMany vs %.0f jobs/s multi-row INSERT (batches of %d): ratio %.2f (goal >= 0.8)\n", r.EnqueueManyPerSecond, r.InsertManyPerSecond, r.BatchSize, r.BatchRatioVsInsertMany)
	if *asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
	}
	if r.OverAdmitted != 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d jobs admitted beyond the limit", r.OverAdmitted)}
	}
	return nil
}
