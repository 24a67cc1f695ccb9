package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Every command works as on a managed server: logged in as a member of the
// NOLOGIN role that owns the queue's tables, without superuser,
// CREATEROLE or pg_read_all_stats. plan and up say what the role cannot
// see; the grants the application role needs are planned, written and
// made; the member reads the application's slot and frees it.
func TestEveryCommandAsTheTablesOwnersMember(t *testing.T) {
	db := plainJobsDB(t)
	roles := testdb.ManagedRoles(t, db, "public")
	mig := roles.MigratorURL
	u, err := url.Parse(mig)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	grant := `GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "public"."concurrency_limits" TO ` + roles.App + ";"
	cannotSee := "cannot see other roles' sessions"
	fix := "GRANT pg_read_all_stats TO " + roles.Migrator
	dir := filepath.Join(t.TempDir(), "sql")
	steps := []struct {
		args []string
		want []string
	}{
		{[]string{"status", "--database", mig}, []string{"state:    legacy"}},
		{[]string{"plan", "--database", mig}, []string{"state:    legacy", cannotSee, fix, grant}},
		{[]string{"sql", "--dir", dir, "--database", mig}, []string{"_runtime_tables.up.sql"}},
		{[]string{"up", "--database", mig}, []string{cannotSee, fix, "up: legacy -> migrated"}},
		{[]string{"status", "--database", mig}, []string{"state:    migrated"}},
		{[]string{"concurrency", "set", "app.jobs.Email", "--limit", "3", "--reason", "managed", "--force", "--database", mig}, nil},
		{[]string{"concurrency", "status", "--database", mig}, []string{"app.jobs.Email", "job-1"}},
		{[]string{"concurrency", "release", "app.jobs.Email", "0", "--force", "--database", mig}, []string{"freed slot 0"}},
		{[]string{"concurrency", "set", "app.jobs.Email", "--clear", "--database", mig}, nil},
		{[]string{"plan", "--database", mig}, []string{"already migrated"}},
		{[]string{"down", "--database", mig}, []string{cannotSee, "down: migrated -> legacy"}},
		{[]string{"status", "--database", mig}, []string{"state:    legacy"}},
	}
	for _, s := range steps {
		if s.args[0] == "concurrency" && s.args[1] == "status" {
			// The application holds a slot; the member frees it below.
			pool, err := pgxpool.New(context.Background(), roles.AppURL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			slots, err := compat.NewSlots(compat.Pgx(pool), layout.PlainJobs(), compat.SlotsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := slots.Acquire(context.Background(), "app.jobs.Email", 1, "job-1", "worker-1", time.Minute); err != nil || !ok {
				t.Fatalf("the application role takes a slot: %v %v", ok, err)
			}
		}
		code, out, errOut := runCLI(t, s.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", s.args[:2], code, out, errOut)
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", s.args[:2], w, out)
			}
		}
		if strings.Contains(out+errOut, password) {
			t.Errorf("%v printed the password", s.args[:2])
		}
	}
	written, err := filepath.Glob(filepath.Join(dir, "*_runtime_tables.up.sql"))
	if err != nil || len(written) != 1 {
		t.Fatalf("sql wrote %v runtime tables files (%v)", written, err)
	}
	body, err := os.ReadFile(written[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), grant) {
		t.Fatalf("%s lacks %q:\n%s", written[0], grant, body)
	}
}
