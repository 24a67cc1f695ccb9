package migrations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Down refuses while groups break the old unique rule, lists every one of
// them and changes nothing; rows the old rule never covered (plain-jobs'
// retries sharing a key, a single table's finished rows repeating one) are
// not duplicates.
func TestDownRefusesDuplicatesAndOnlyDuplicates(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		s legacy.Schema
		// allowed adds rows the old rule allows; dups adds two offending groups.
		allowed, dups string
		want          []migrations.DuplicateGroup
	}{{
		s: legacy.PlainJobs,
		allowed: `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, concurrency_key)
SELECT now(), gen_random_uuid(), 'app.jobs.ChargeJob', 'test', 0, 'default', 3, a, 'shared' FROM generate_series(0, 3) a;
INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, concurrency_key)
SELECT now(), gen_random_uuid(), 'app.jobs.ChargeJob', 'test', 0, 'default', 0, 0, '' FROM generate_series(1, 3)`,
		dups: `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, concurrency_key)
SELECT now(), gen_random_uuid(), c, 'test', 0, 'default', 0, 0, k FROM (VALUES ('app.jobs.SendEmail', 'dup-1'), ('app.jobs.SendEmail', 'dup-1'), ('app.jobs.SendEmail', 'dup-1'),
  ('app.jobs.BuildReport', 'dup-2'), ('app.jobs.BuildReport', 'dup-2')) v(c, k)`,
		want: []migrations.DuplicateGroup{{Class: "app.jobs.SendEmail", Key: "dup-1", Count: 3}, {Class: "app.jobs.BuildReport", Key: "dup-2", Count: 2}},
	}, {
		s: legacy.SingleTable,
		allowed: `INSERT INTO jobs (job_type, status, concurrency_key) VALUES ('email.send', 'done', 'once'), ('email.send', 'failed', 'once'), ('email.send', 'pending', 'once'),
  ('email.send', 'pending', NULL), ('email.send', 'pending', NULL)`,
		dups: `INSERT INTO jobs (job_type, status, concurrency_key) VALUES ('report.build', 'pending', 'dup-1'), ('report.build', 'running', 'dup-1'), ('report.build', 'paused', 'dup-1'),
  ('sync.account', 'pending', 'dup-2'), ('sync.account', 'pending', 'dup-2')`,
		want: []migrations.DuplicateGroup{{Class: "report.build", Key: "dup-1", Count: 3}, {Class: "sync.account", Key: "dup-2", Count: 2}},
	}, {
		s:       legacy.TeamQueue,
		allowed: `INSERT INTO "Billing Queue"."JobRequests" (kind, concurrency_key) VALUES ('invoice.send', NULL), ('invoice.send', NULL)`,
		dups: `INSERT INTO "Billing Queue"."JobRequests" (kind, concurrency_key) VALUES ('invoice.send', 'dup-1'), ('invoice.send', 'dup-1'), ('invoice.send', 'dup-1'),
  ('ledger.sync', 'dup-2'), ('ledger.sync', 'dup-2')`,
		want: []migrations.DuplicateGroup{{Class: "invoice.send", Key: "dup-1", Count: 3}, {Class: "ledger.sync", Key: "dup-2", Count: 2}},
	}}
	for _, c := range cases {
		t.Run(c.s.Name, func(t *testing.T) {
			refused := legacyDB(t, c.s)
			allowed := legacyDB(t, c.s)
			for _, url := range []string{refused, allowed} {
				if _, err := migrations.Up(ctx, url, c.s.Layout, migrations.Options{}); err != nil {
					t.Fatal(err)
				}
				if _, err := testdb.Connect(t, url).Exec(ctx, c.allowed); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := testdb.Connect(t, refused).Exec(ctx, c.dups); err != nil {
				t.Fatal(err)
			}
			before := takeSnapshot(t, refused, c.s.Layout)
			_, err := migrations.Down(ctx, refused, c.s.Layout, migrations.Options{})
			var de *migrations.DuplicatesError
			if !errors.As(err, &de) {
				t.Fatalf("down with duplicates: %v, want a *DuplicatesError", err)
			}
			if len(de.Groups) != len(c.want) {
				t.Fatalf("down listed %d groups, want %d: %v", len(de.Groups), len(c.want), err)
			}
			for i, g := range de.Groups {
				w := c.want[i]
				if g.Class != w.Class || g.Key != w.Key || g.Count != w.Count {
					t.Errorf("group %d = %s/%s x%d, want %s/%s x%d", i, g.Class, g.Key, g.Count, w.Class, w.Key, w.Count)
				}
				if !contains(err.Error(), w.Class, w.Key) {
					t.Errorf("the message does not name %s/%s:\n%v", w.Class, w.Key, err)
				}
			}
			if d := before.diff(takeSnapshot(t, refused, c.s.Layout)); d != "" {
				t.Fatalf("a refused down changed the database:\n%s", d)
			}
			rep, err := migrations.Down(ctx, allowed, c.s.Layout, migrations.Options{})
			if err != nil {
				t.Fatalf("down over rows the old rule allows: %v", err)
			}
			if rep.After != migrations.Legacy {
				t.Fatalf("down ended %s", rep.After)
			}
		})
	}
}

// Down never drops a table or column that holds operator data: it keeps
// them, names them, and still restores the queue's tables.
func TestDownKeepsOperatorData(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	conn := testdb.Connect(t, url)
	if _, err := conn.Exec(ctx, `INSERT INTO concurrency_limits (group_name, concurrency_limit, reason) VALUES ('app.jobs.ChargeJob', 0, 'maintenance');
UPDATE plainjobs_jobresult SET concurrency_skip = '{"reason": "concurrency_limit"}' WHERE id = (SELECT min(id) FROM plainjobs_jobresult)`); err != nil {
		t.Fatal(err)
	}
	rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.After != migrations.Legacy || len(rep.Kept) != 2 {
		t.Fatalf("down: %s, kept %q; want legacy, 2 kept", rep.After, rep.Kept)
	}
	var limits, skips int
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM concurrency_limits), (SELECT count(*) FROM plainjobs_jobresult WHERE concurrency_skip IS NOT NULL)").Scan(&limits, &skips); err != nil {
		t.Fatal(err)
	}
	if limits != 1 || skips != 1 {
		t.Fatalf("after down: %d overrides, %d skip records; want 1, 1", limits, skips)
	}
	for _, missing := range []string{"concurrency_slots", "concurrency_reschedules", "migrate_unique_version"} {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", missing).Scan(&exists); err != nil || exists {
			t.Errorf("%s still exists after down (err %v)", missing, err)
		}
	}
}
