package jobmodgen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/jobmodgen"
)

// TestGeneratedModuleBuildsAndPasses runs the real go toolchain over a
// generated module of each layout: it must vet clean and pass its own
// tests, and the registered layout's job packages never import queue.
func TestGeneratedModuleBuildsAndPasses(t *testing.T) {
	dir := t.TempDir()
	st, err := jobmodgen.Generate(dir, 3, 10, jobmodgen.Importing)
	if err != nil {
		t.Fatal(err)
	}
	if st.Packages != 3 || st.JobTypes != 10 || st.Provable != 5 || st.NonJobs != 3 {
		t.Errorf("stats = %+v", st)
	}
	// Each package: one call per job type in Keys, one in InterfaceKeys,
	// one method expression; packages after the first add Upstream; the
	// queue calls it once.
	if want := 10 + 3*2 + 2 + 1; st.CallSites != want {
		t.Errorf("call sites = %d, want %d", st.CallSites, want)
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	src, err := os.ReadFile(filepath.Join(dir, "jobs001", "jobs001.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prev.All()[0].UniqueKey()", "func (j *Job4) UniqueKey() string", "func (Job6) UniqueKey() string"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("jobs001.go lacks %q", want)
		}
	}

	dir = t.TempDir()
	st, err = jobmodgen.Generate(dir, 3, 10, jobmodgen.Registered)
	if err != nil {
		t.Fatal(err)
	}
	// Each package: one call per job type in Keys, one method
	// expression; packages after the first add Upstream; the registry's
	// method value; the queue's call.
	if want := 10 + 3 + 2 + 1 + 1; st.CallSites != want || st.JobTypes != 10 || st.NonJobs != 3 {
		t.Errorf("registered layout: stats = %+v, want %d call sites", st, want)
	}
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("registered layout: go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for k := 0; k < 3; k++ {
		name := fmt.Sprintf("jobs%03d", k)
		src, err := os.ReadFile(filepath.Join(dir, name, name+".go"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), jobmodgen.Module+"/queue") {
			t.Errorf("registered layout: %s imports queue", name)
		}
	}
}

func TestRejectsBadInput(t *testing.T) {
	if _, err := jobmodgen.Generate(t.TempDir(), 0, 10, jobmodgen.Importing); err == nil {
		t.Error("0 packages: no error")
	}
	if _, err := jobmodgen.Generate(t.TempDir(), 5, 3, jobmodgen.Importing); err == nil {
		t.Error("fewer jobs than packages: no error")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := jobmodgen.Generate(dir, 1, 1, jobmodgen.Importing); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("non-empty dir: err = %v", err)
	}
}
