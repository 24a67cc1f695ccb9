package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/internal/version"
)

// TestMain stops a throwaway PostgreSQL cluster, if the tests started one.
// Started by the interruption tests as their child process (see
// startChild), it runs one command line instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(childMain(os.Args[1:]))
	}
	code := testdb.Main(m)
	if builtBin != "" {
		_ = os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// runCLI runs one command line in-process and returns its exit code and
// outputs.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLIContext(context.Background(), args...)
}

// runCLIContext is runCLI under ctx (a context that carries a statement
// recorder: pgurl.WithTracer).
func runCLIContext(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, &env{stdout: &out, stderr: &errOut}, args)
	return code, out.String(), errOut.String()
}

func TestHelpListsEveryCommand(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(out, "migrate-unique "+c.name) {
			t.Errorf("help does not list %q:\n%s", c.name, out)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || strings.TrimSpace(out) != "migrate-unique "+version.Version {
		t.Fatalf("version = %d %q", code, out)
	}
}

func TestUnknownCommandIsAClearError(t *testing.T) {
	code, _, errOut := runCLI(t, "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "migrate-unique help") {
		t.Fatalf("unknown command: exit %d, stderr %q", code, errOut)
	}
}

func TestNoArgumentsPrintsUsage(t *testing.T) {
	code, _, errOut := runCLI(t)
	if code != 2 || !strings.Contains(errOut, "Usage:") {
		t.Fatalf("no arguments: exit %d, stderr %q", code, errOut)
	}
}

// TestNoInterruptedLineAfterANormalExit runs commands that end by
// themselves with the signal watcher started late, after the command has
// returned and the process is cleaning up: no run may say it was
// interrupted.
func TestNoInterruptedLineAfterANormalExit(t *testing.T) {
	t.Setenv(pgurl.EnvVar, "")
	watcherStarts = func(ctx context.Context) {
		// Late enough that the command has returned: the cleanup that
		// cancels ctx, if it runs now, makes both cases ready at once.
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Millisecond):
		}
	}
	t.Cleanup(func() { watcherStarts = nil })
	for _, args := range [][]string{{"version"}, {"help"}, {"status"}} {
		for i := range 100 {
			var out, errOut bytes.Buffer
			code := runProcess(&env{stdout: &out, stderr: &errOut}, args)
			if strings.Contains(errOut.String(), "interrupted") {
				t.Fatalf("%v (run %d) exited %d by itself and printed: %s", args, i+1, code, errOut.String())
			}
		}
	}
}

// TestUsageSaysWhatTheDocsSay: what a new user reads first. Every
// command's -h usage line names --json when the command takes it; flag
// errors spell a flag as the command's docs do (--limit; lint and rewrite
// write -name, as Go's tools); bench -h lists the benchmarks; README's
// command list names every command; pause speaks of a class.
func TestUsageSaysWhatTheDocsSay(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if !strings.Contains(string(readme), "migrate-unique "+c.name) {
			t.Errorf("README.md does not show the command %q", c.name)
		}
	}
	for _, args := range [][]string{{"plan"}, {"up"}, {"down"}, {"status"}, {"sql"}, {"lint"}, {"concurrency", "status"}, {"concurrency", "set"},
		{"concurrency", "release"}, {"concurrency", "pause"}, {"concurrency", "resume"}, {"demo"}, {"bench", "slots"}, {"bench", "admission"}} {
		code, _, errOut := runCLI(t, append(args, "-h")...)
		usage, _, _ := strings.Cut(errOut, "\n")
		if code != 0 || !strings.HasPrefix(usage, "Usage: migrate-unique "+strings.Join(args, " ")) {
			t.Errorf("%v -h: exit %d:\n%s", args, code, errOut)
			continue
		}
		takesJSON := strings.Contains(errOut, "\n  --json") || strings.Contains(errOut, "\n  -json")
		if takesJSON != strings.Contains(usage, "-json") {
			t.Errorf("%v -h: the usage line %q and the flags disagree on --json:\n%s", args, usage, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"concurrency", "set", "G", "--limit", "x"}, `invalid value "x" for flag --limit: `},
		{[]string{"status", "--nope"}, "flag provided but not defined: --nope;"},
		{[]string{"status", "--json=maybe"}, `invalid boolean value "maybe" for --json: `},
		{[]string{"plan", "--database"}, "flag needs an argument: --database;"},
		{[]string{"rewrite", "-nope"}, "flag provided but not defined: -nope;"},
		{[]string{"concurrency", "pause", ""}, "the class name is empty; give the job's class"},
		{[]string{"concurrency", "resume", "::k"}, `"::k" is no class`},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 saying %q", c.args, code, errOut, c.want)
		}
	}
	code, _, errOut := runCLI(t, "bench", "-h")
	if code != 0 || !strings.Contains(errOut, "bench NAME -h") {
		t.Errorf("bench -h: exit %d:\n%s", code, errOut)
	}
	for name, b := range benches {
		if !strings.Contains(errOut, "\n  "+name+" ") || !strings.Contains(errOut, b.summary) {
			t.Errorf("bench -h does not list %q:\n%s", name, errOut)
		}
	}
}
