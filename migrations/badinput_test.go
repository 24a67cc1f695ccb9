package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Bad input gets a clear message naming the thing and the fix, and changes
// nothing.
func TestBadInputIsAClearErrorAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	pj := legacy.PlainJobs.Layout
	withTable := func(name string) layout.Layout {
		l := pj
		l.RequestsTable = name
		return l
	}
	cases := []struct {
		name  string
		setup string // run on the database first
		l     layout.Layout
		url   func(string) string
		want  []string
		check func(t *testing.T, err error)
	}{{
		name: "unparsable URL",
		url:  func(string) string { return "postgres://user:s3cret@[::1" },
		want: []string{"cannot parse the database URL", "postgres://user:password@host:5432/dbname"},
	}, {
		name: "unreachable server",
		url:  func(string) string { return "postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=2" },
		want: []string{"connect to 127.0.0.1:1/db"},
	}, {
		name: "missing table",
		l:    withTable("plainjobs_jobrequests"),
		want: []string{`table "public"."plainjobs_jobrequests" does not exist`, `"public"."plainjobs_jobrequest"`, "(the default flags)"},
		check: func(t *testing.T, err error) {
			if !migrations.IsNotFound(err) {
				t.Errorf("not a *NotFoundError: %T", err)
			}
		},
	}, {
		name: "missing class column",
		l:    layout.Layout{Schema: "public", ClassColumn: "job_kind", RequestsTable: "plainjobs_jobrequest", ProcessesTable: "plainjobs_jobprocess", ResultsTable: "plainjobs_jobresult"},
		want: []string{`has no class column "job_kind"`, "--class-column"},
	}, {
		name:  "missing key column",
		setup: `CREATE TABLE other_jobrequest (id int, job_class text)`,
		l:     withTable("other_jobrequest"),
		want:  []string{`"public"."other_jobrequest" has no key column unique_key`},
	}, {
		name:  "both key columns",
		setup: `ALTER TABLE plainjobs_jobprocess ADD COLUMN concurrency_key text`,
		l:     pj,
		want:  []string{`"public"."plainjobs_jobprocess" has both unique_key and concurrency_key`},
	}, {
		name:  "a name matching two candidates",
		setup: `CREATE TABLE "Jobs" (job_type text, status text, unique_key text); CREATE TABLE "JOBS" (job_type text, status text, unique_key text)`,
		l:     layout.Layout{JobsTable: "jobs", ClassColumn: "job_type", StateColumn: "status", ActiveStates: []string{"pending"}},
		want:  []string{`"jobs" matches 2 candidates`, `"public"."JOBS"`, `"public"."Jobs"`, "name one exactly"},
	}, {
		name: "a table name that needs quoting",
		l:    withTable(`Plainjobs JobRequest`),
		want: []string{`table "public"."Plainjobs JobRequest" does not exist`},
	}, {
		name: "SQL injection in a table name",
		l:    withTable(`plainjobs_jobrequest"; DROP TABLE plainjobs_jobresult; --`),
		want: []string{`table "public"."plainjobs_jobrequest""; DROP TABLE plainjobs_jobresult; --" does not exist`},
	}, {
		name: "SQL injection in the schema",
		l: func() layout.Layout {
			l := pj
			l.Schema = `public"; DROP TABLE plainjobs_jobresult; --`
			return l
		}(),
		want: []string{`schema "public""; DROP TABLE plainjobs_jobresult; --" does not exist`},
	}, {
		name:  "a schema that does not exist",
		setup: `CREATE SCHEMA "Team"; CREATE TABLE "Team".jobs (job_type text, status text, unique_key text)`,
		l: func() layout.Layout {
			l := pj
			l.Schema = "nc_nope"
			return l
		}(),
		want: []string{`schema "nc_nope" does not exist (--schema)`, `the schemas holding queue-shaped tables (with a unique_key or concurrency_key column) are "Team", "public": pass one with --schema`},
		check: func(t *testing.T, err error) {
			if msg := err.Error(); strings.Count(msg, "nc_nope") != 1 || strings.Contains(msg, "name it exactly") || strings.Contains(msg, " matches ") {
				t.Errorf("the schema is named more than once, or as a near miss of each table:\n%s", msg)
			}
		},
	}, {
		name: "invalid layout",
		l:    layout.Layout{RequestsTable: "a", JobsTable: "b"},
		want: []string{"choose one layout"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := legacyDB(t, legacy.PlainJobs)
			if c.setup != "" {
				if _, err := testdb.Connect(t, url).Exec(ctx, c.setup); err != nil {
					t.Fatal(err)
				}
			}
			before := takeSnapshot(t, url, pj)
			target := url
			if c.url != nil {
				target = c.url(url)
			}
			l := c.l
			if l.Tables() == nil {
				l = pj
			}
			for _, run := range []struct {
				name string
				f    func() error
			}{
				{"up", func() error { _, err := migrations.Up(ctx, target, l, migrations.Options{}); return err }},
				{"down", func() error { _, err := migrations.Down(ctx, target, l, migrations.Options{}); return err }},
				{"plan", func() error { _, err := migrations.Plan(ctx, target, l); return err }},
			} {
				err := run.f()
				if run.name == "plan" && err == nil && c.url == nil {
					// Plan reports preflight refusals as findings.
					p, _ := migrations.Plan(ctx, target, l)
					var msgs []string
					for _, f := range p.Findings {
						msgs = append(msgs, f.Message)
					}
					err = errors.New(strings.Join(msgs, "\n"))
				}
				if err == nil {
					t.Fatalf("%s succeeded", run.name)
				}
				if !contains(err.Error(), c.want...) {
					t.Errorf("%s: the message lacks %q:\n%v", run.name, c.want, err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("%s: the message shows the password:\n%v", run.name, err)
				}
				if c.check != nil {
					c.check(t, err)
				}
			}
			if d := before.diff(takeSnapshot(t, url, pj)); d != "" {
				t.Fatalf("bad input changed the database:\n%s", d)
			}
		})
	}
}

// When the layout is not found, the error lists the tables that have a
// unique_key column with the flags that select them.
func TestNotFoundListsCandidatesWithTheirFlags(t *testing.T) {
	url := testdb.New(t, testdb.FromTemplate("all-legacy/v1", func(ctx context.Context, url string) error {
		for _, s := range []legacy.Schema{legacy.TeamQueue, legacy.SingleTable} {
			if err := s.LoadURL(ctx, url, 10); err != nil {
				return err
			}
		}
		return nil
	}))
	_, err := migrations.Up(context.Background(), url, layout.PlainJobs(), migrations.Options{})
	if !migrations.IsNotFound(err) {
		t.Fatalf("up on a database without plain-jobs' tables: %v", err)
	}
	for _, want := range []string{
		`"Billing Queue"."JobRequests", "Billing Queue"."job_processes"`,
		`--schema 'Billing Queue' --class-column kind --requests-table JobRequests --processes-table job_processes`,
		`"public"."jobs"`,
		`--class-column job_type --jobs-table jobs --state-column status --active-states pending,running,paused   (the states the unique rule covered: WHERE (status = ANY (ARRAY[`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message lacks %q:\n%v", want, err)
		}
	}
}
