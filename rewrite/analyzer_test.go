package rewrite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"github.com/migrate-unique/migrate-unique/analyzer/load"
	"github.com/migrate-unique/migrate-unique/rewrite"
)

// TestMigrateJobModules runs the real analyzer over whole modules: after
// Write the module builds, vets and passes its own tests (which check the
// SPEC section 2 semantics of the rewritten jobs), exactly the files the
// archive's "changes:" line names are changed, and a second run changes
// nothing.
func TestMigrateJobModules(t *testing.T) {
	for _, tc := range []struct {
		archive string
		tags    []string
		cfg     analyzer.Config
	}{
		{archive: "jobs.txtar", tags: []string{"integration"}},
		{archive: "external_unimported.txtar"},
		{archive: "usedas_third.txtar"},
		{archive: "interface.txtar", cfg: analyzer.Config{
			Interfaces: []string{"example.com/mod/queue.Task"},
			Renames: map[string]string{
				"example.com/mod/queue.WithUniqueKey": "WithConcurrencyKey",
				"example.com/mod/queue.ErrDuplicate":  "ErrConcurrencyLimit",
			},
		}},
	} {
		t.Run(tc.archive, func(t *testing.T) {
			ctx := context.Background()
			m := extract(t, tc.archive)
			if _, err := analyzer.New(tc.cfg); err != nil {
				t.Fatal(err)
			}
			// The job model of the whole run, as the command uses it.
			opts := m.options(nil, tc.tags...)
			opts.Program = tc.cfg.ForProgram
			before := m.snapshot(t)
			res, err := rewrite.Plan(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range res.Files {
				got = append(got, "mod/"+strings.TrimPrefix(f.Path, m.dir+"/"))
			}
			if want := m.changes; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("changed files:\n%q\nwant:\n%q", got, want)
			}
			human := map[string]bool{}
			for _, f := range res.Findings {
				if !f.Fixed {
					human[f.Category] = true
				}
			}
			var gotHuman []string
			for c := range human {
				gotHuman = append(gotHuman, c)
			}
			sort.Strings(gotHuman)
			if strings.Join(gotHuman, " ") != strings.Join(m.human, " ") {
				t.Errorf("categories left for a human: %q, want %q", gotHuman, m.human)
			}
			// lint reports exactly what rewrite does: the same findings,
			// each with a fix exactly when rewrite applies one.
			if len(tc.tags) == 0 {
				found, err := load.Lint(ctx, load.Config{Dir: opts.Dir, Env: opts.Env, Tests: true}, []string{"./..."}, tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				var lint, planned []string
				for _, f := range found {
					lint = append(lint, fmt.Sprintf("%s [%s] %s fix=%v", f.Position, f.Code, f.Message, f.Fixable))
				}
				for _, f := range res.Findings {
					planned = append(planned, fmt.Sprintf("%s [%s] %s fix=%v", f.Position, f.Category, f.Message, f.Fixed))
				}
				sort.Strings(lint)
				sort.Strings(planned)
				if strings.Join(lint, "\n") != strings.Join(planned, "\n") {
					t.Errorf("lint and rewrite disagree:\n--- lint:\n%s\n--- rewrite:\n%s", strings.Join(lint, "\n"), strings.Join(planned, "\n"))
				}
			}
			var diff, summary bytes.Buffer
			if err := res.Diff(&diff); err != nil {
				t.Fatal(err)
			}
			if err := res.Summary(&summary, nil); err != nil {
				t.Fatal(err)
			}
			t.Logf("summary:\n%s\ndiff:\n%s", summary.String(), diff.String())

			// The diff applies to a pristine copy and gives the same files as Write.
			applied := extract(t, tc.archive)
			cmd := exec.Command("git", "apply", "-p1", "--directory=mod", "-")
			cmd.Dir, cmd.Stdin = applied.root, bytes.NewReader(diff.Bytes())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v\n%s", err, out)
			}

			if err := res.Write(); err != nil {
				t.Fatal(err)
			}
			after := m.snapshot(t)
			changed := map[string]bool{}
			for _, p := range m.changes {
				changed[p] = true
			}
			for p, b := range before {
				if !changed[p] && after[p] != b {
					t.Errorf("%s changed but should be byte-identical", p)
				}
			}
			if appliedFiles := applied.snapshot(t); !equalMaps(appliedFiles, after) {
				t.Errorf("git apply of the diff and Write give different trees")
			}
			m.goRun(t, "build", "./...")
			m.goRun(t, "vet", "./...")
			m.goRun(t, "test", "./...")
			for _, tags := range tc.tags {
				m.goRun(t, "vet", "-tags", tags, "./...")
				m.goRun(t, "test", "-tags", tags, "./...")
			}

			again, err := rewrite.Plan(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Files) != 0 {
				var d bytes.Buffer
				again.Diff(&d)
				t.Errorf("a second run changes %d files:\n%s", len(again.Files), d.String())
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestGeneratedMockNeedsRegenerating: a generated mock used as a job stops
// implementing the rewritten interface until it is regenerated. Plan
// refuses, naming the error; with AllowTypeErrors it lists the errors, and
// the module builds once the mock is regenerated.
func TestGeneratedMockNeedsRegenerating(t *testing.T) {
	ctx := context.Background()
	m := extract(t, "mockused.txtar")
	a, err := analyzer.New(analyzer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	before := m.snapshot(t)
	_, err = rewrite.Plan(ctx, m.options(a))
	var ve *rewrite.VerifyError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "MockJob") {
		t.Fatalf("Plan: %v, want a VerifyError about MockJob", err)
	}
	m.checkUnchanged(t, before)

	opts := m.options(a)
	opts.AllowTypeErrors = true
	res, err := rewrite.Plan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TypeErrors) == 0 || !strings.Contains(strings.Join(res.TypeErrors, "\n"), "MockJob") {
		t.Fatalf("TypeErrors = %q, want the mock's", res.TypeErrors)
	}
	var summary bytes.Buffer
	res.Summary(&summary, nil)
	if !strings.Contains(summary.String(), "does not type-check") || !strings.Contains(summary.String(), "[generated]") {
		t.Errorf("summary does not list the type errors and the generated file:\n%s", summary.String())
	}
	if len(res.Files) != 1 || !strings.HasSuffix(res.Files[0].Path, "jobs/jobs.go") {
		t.Fatalf("changes %d files, want jobs/jobs.go only", len(res.Files))
	}
	if err := res.Write(); err != nil {
		t.Fatal(err)
	}
	for p, content := range m.regenerated {
		if err := os.WriteFile(filepath.Join(m.root, p), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.goRun(t, "vet", "./...")
	m.goRun(t, "test", "./...")
	again, err := rewrite.Plan(ctx, m.options(a))
	if err != nil || len(again.Files) != 0 {
		t.Fatalf("second run: %v, %d files", err, len(again.Files))
	}
}
