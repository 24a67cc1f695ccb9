package migrations_test

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
)

var update = flag.Bool("update", false, "rewrite migrations/plainjobs from the templates")

// The committed golang-migrate files are exactly what the templates render;
// run `go test ./migrations -run TestPlainJobsFilesMatchTemplates -update`
// after changing a template.
func TestPlainJobsFilesMatchTemplates(t *testing.T) {
	files, err := migrations.Files(layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		old, _ := filepath.Glob("plainjobs/*.sql")
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for name, sql := range files {
			if err := os.WriteFile(filepath.Join("plainjobs", name), []byte(sql), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	onDisk, err := filepath.Glob("plainjobs/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range onDisk {
		name := filepath.Base(f)
		names = append(names, name)
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := files[name]
		if !ok {
			t.Errorf("plainjobs/%s is not rendered by the templates any more; delete it (or run with -update)", name)
			continue
		}
		if string(got) != want {
			t.Errorf("plainjobs/%s drifted from its template; run with -update.\n--- file\n%s\n--- template\n%s", name, got, want)
		}
	}
	for name := range files {
		if _, err := os.Stat(filepath.Join("plainjobs", name)); err != nil {
			t.Errorf("plainjobs/%s is missing (run with -update)", name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("no file in plainjobs/")
	}
}

// One statement per file wherever CONCURRENTLY is involved, and none of
// golang-migrate's unsafe extensions.
func TestFilesAreSafeForGolangMigrate(t *testing.T) {
	for _, l := range []layout.Layout{layout.PlainJobs(),
		{Schema: "Billing Queue", ClassColumn: "kind", RequestsTable: "JobRequests", ProcessesTable: "job_processes"},
		{JobsTable: "jobs", ClassColumn: "job_type", StateColumn: "status", ActiveStates: []string{"pending", "running"}}} {
		files, err := migrations.Files(l)
		if err != nil {
			t.Fatal(err)
		}
		for name, sql := range files {
			body := stripComments(sql)
			if strings.Contains(body, "CONCURRENTLY") && strings.Count(strings.TrimSpace(body), ";") != 1 {
				t.Errorf("%s: a CONCURRENTLY statement shares its file:\n%s", name, sql)
			}
			for _, bad := range []string{"x-statement-timeout", "x-multi-statement", "schema_migrations"} {
				if strings.Contains(body, bad) {
					t.Errorf("%s mentions %s", name, bad)
				}
			}
		}
	}
}

func stripComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
