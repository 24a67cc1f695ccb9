package main

import (
	"bytes"
	"context"
	"os"
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
	os.Exit(testdb.Main(m))
}

// runCLI runs one command line in-process and returns its exit code and
// outputs.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), &env{stdout: &out, stderr: &errOut}, args)
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
