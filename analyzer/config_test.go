package analyzer_test

import (
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/analyzer"
)

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  analyzer.Config
		want string
	}{
		{"interface without a package", analyzer.Config{Interfaces: []string{"Job"}}, `interface "Job": want importpath.Name`},
		{"interface ending in a dot", analyzer.Config{Interfaces: []string{"example.com/jobs."}}, "want importpath.Name"},
		{"interfaces as one comma-separated string", analyzer.Config{Interfaces: []string{"example.com/a.Job,example.com/b.Job"}}, "want importpath.Name"},
		{"interface with a space", analyzer.Config{Interfaces: []string{"example.com/a .Job"}}, "want importpath.Name"},
		{"rename with a comma in the path", analyzer.Config{Renames: map[string]string{"a/b.X=Y,a/b.Old": "New"}}, "want importpath.Old=New"},
		{"rename without a package", analyzer.Config{Renames: map[string]string{"Old": "New"}}, "want importpath.Old=New"},
		{"rename to another package", analyzer.Config{Renames: map[string]string{"a/b.Old": "c/d.New"}}, "must be in the same package a/b"},
		{"rename to a non-identifier", analyzer.Config{Renames: map[string]string{"a/b.Old": "new-name"}}, "is not a Go identifier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := analyzer.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := analyzer.New(analyzer.Config{
		Interfaces: []string{"example.com/app/jobs.Job"},
		Renames:    map[string]string{"example.com/app/jobs.ErrDuplicate": "example.com/app/jobs.ErrConcurrencyLimitReached"},
	}); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// TestFlags sets the package-level Analyzer's flags the way go vet passes
// them: comma-separated lists, repeated flags adding up.
func TestFlags(t *testing.T) {
	fs := analyzer.Analyzer.Flags
	for _, kv := range [][2]string{
		{"interface", "example.com/a.Job, example.com/b.Task"},
		{"interface", "example.com/c.Worker"},
		{"rename", "example.com/a.WithUniqueKey=WithConcurrencyKey,example.com/a.ErrDuplicate=example.com/a.ErrLimit"},
		{"table", "queue.jobs, jobs_archive"},
		{"table", `"public"."jobs_done"`},
	} {
		if err := fs.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("-%s=%s: %v", kv[0], kv[1], err)
		}
	}
	if got, want := fs.Lookup("interface").Value.String(), "example.com/a.Job,example.com/b.Task,example.com/c.Worker"; got != want {
		t.Errorf("-interface = %q, want %q", got, want)
	}
	if got, want := fs.Lookup("rename").Value.String(), "example.com/a.ErrDuplicate=ErrLimit,example.com/a.WithUniqueKey=WithConcurrencyKey"; got != want {
		t.Errorf("-rename = %q, want %q", got, want)
	}
	if got, want := fs.Lookup("table").Value.String(), "jobs,jobs_archive,jobs_done"; got != want {
		t.Errorf("-table = %q, want %q", got, want)
	}
	if fs.Lookup("all-sql") == nil {
		t.Error("no -all-sql flag")
	}
	for _, kv := range [][2]string{{"interface", "Job"}, {"rename", "example.com/a.Old"}, {"rename", "example.com/a.Old=b.New"}, {"table", "jobs; drop"}} {
		if err := fs.Set(kv[0], kv[1]); err == nil {
			t.Errorf("-%s=%s: no error", kv[0], kv[1])
		}
	}
}

func TestCodes(t *testing.T) {
	fixable := 0
	seen := map[analyzer.Code]bool{}
	for _, c := range analyzer.Codes {
		if seen[c] {
			t.Errorf("code %s listed twice", c)
		}
		seen[c] = true
		if c.Fixable() {
			fixable++
		}
		if d := c.Describe(); d == "" || d == "unknown code" {
			t.Errorf("code %s has no description", c)
		}
	}
	if fixable != 5 || len(analyzer.Codes) != 11 {
		t.Errorf("%d codes, %d fixable; want 11 and 5", len(analyzer.Codes), fixable)
	}
}
