package compat

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Every statement the runtime sends opens with layout.CompatMarker, so that
// pg_stat_activity tells compat's sessions (whose statements name
// unique_key on a legacy or expanded layout) apart from the old application
// version's: the last statement of each of the client's sessions, single and
// batch, is marked.
func TestStatementsCarryTheCompatMarker(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, false)
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(q.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["application_name"] = "compat-marker"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := NewClient(Pgx(pool), q.l.Layout)
	if err != nil {
		t.Fatal(err)
	}
	last := func() string {
		t.Helper()
		var query string
		if err := q.pool.QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE application_name = 'compat-marker'`).Scan(&query); err != nil {
			t.Fatal(err)
		}
		return query
	}
	if _, err := c.Enqueue(ctx, Job{Class: "app.jobs.Sync", Value: keyedOne{"acct-1"}}); err != nil {
		t.Fatal(err)
	}
	if got := last(); !strings.HasPrefix(got, layout.CompatMarker+" ") || !strings.Contains(got, layout.LegacyKeyColumn) {
		t.Fatalf("the client's last statement %.120q...: want it to open with %q and name %s", got, layout.CompatMarker, layout.LegacyKeyColumn)
	}
	if _, err := c.EnqueueMany(ctx, []Job{{Class: "app.jobs.Sync", Value: keyedOne{"acct-2"}}, {Class: "app.jobs.Sync", Value: keyedOne{"acct-3"}}}); err != nil {
		t.Fatal(err)
	}
	// pg_stat_activity keeps the first track_activity_query_size bytes
	// (1024 by default) of a statement: the batch statement's first bytes
	// are its arrays' parameters, so a batch statement is recognized by its
	// opening.
	if got := last(); !strings.HasPrefix(got, layout.CompatMarker+" ") || !strings.Contains(got, layout.LegacyKeyColumn) && !strings.HasPrefix(got, layout.CompatMarker+" WITH RECURSIVE c AS") {
		t.Fatalf("the client's last batch statement %.120q...: want it to open with %q and name %s (or be the batch's WITH RECURSIVE)", got, layout.CompatMarker, layout.LegacyKeyColumn)
	}
}
