package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestBenchVet runs the vet benchmark, small, with the built binary as the
// vet tool (the test binary cannot be one): every round must find exactly
// the findings the generator made, and the summary gives both tools' figures
// and their ratio. No time is asserted.
func TestBenchVet(t *testing.T) {
	bin := builtTool(t)
	out, code := runIn(t, t.TempDir(), bin, "bench", "vet", "-packages", "2", "-jobs", "4", "-runs", "1")
	if code != 0 {
		t.Fatalf("bench vet exited %d:\n%s", code, out)
	}
	for _, p := range []string{
		`(?m)^vet benchmark: 2 packages, 4 job types, \d+ findings expected`,
		`(?m)^round 1: go vet \S+ wall / \S+ cpu, go vet -vettool=migrate-unique \S+ wall / \S+ cpu, wall ratio [\d.]+, cpu ratio [\d.]+$`,
		`(?m)^  ratio +[\d.]+ wall, [\d.]+ cpu \(target <= 1\.3\)$`,
	} {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("output lacks %q:\n%s", p, out)
		}
	}

	out, code = runIn(t, t.TempDir(), bin, "bench", "vet", "-runs", "0")
	if code != 2 || !strings.Contains(out, "-runs 0: want at least 1") {
		t.Errorf("bench vet -runs 0: exit %d, want 2:\n%s", code, out)
	}
}

// TestBenchUsage: bench without a name, or with an unknown one, is bad
// usage (exit 2) and lists the benchmarks.
func TestBenchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage: migrate-unique bench NAME [flags]"},
		{[]string{"-h"}, 0, "\n  admission  "},
		{[]string{"nosuch"}, 2, `unknown benchmark "nosuch"; choose one of admission, dashboard, lint, migration, rewrite, slots, vet`},
	} {
		code, out, errOut := runCLI(t, append([]string{"bench"}, tc.args...)...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("bench %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}

// TestBenchLint runs the lint benchmark, small: one round, the three tools
// and plain go vet measured, each as a ratio to go vet -vettool, and lint
// and the vet tool agreeing on the exit status. No figure is asserted.
func TestBenchLint(t *testing.T) {
	bin := builtTool(t)
	out, code := runIn(t, t.TempDir(), bin, "bench", "lint", "-packages", "2", "-jobs", "4", "-runs", "1")
	if code != 0 {
		t.Fatalf("bench lint exited %d:\n%s", code, out)
	}
	for _, p := range []string{
		`(?m)^lint benchmark: generated module: 2 packages, 4 job types`,
		`(?m)^round 1: .*vet-tool \S+/\S+/\d+MiB`,
		`(?m)^  go vet -vettool=migrate-unique \(baseline\) +\S+ +\S+ +\d+ MiB +1\.00 +1\.00$`,
		`(?m)^  migrate-unique lint +\S+ +\S+ +\d+ MiB +[\d.]+ +[\d.]+$`,
		`(?m)^  migrate-unique rewrite -diff +\S+ +\S+ +\d+ MiB +[\d.]+ +[\d.]+$`,
		`(?m)^lint against go vet -vettool: [\d.]+x cpu, [\d.]+x peak memory \(targets <= 1\.0 cpu, <= 1\.3 peak\); exit 1$`,
		`(?m)^rewrite -diff against go vet -vettool: [\d.]+x cpu, [\d.]+x peak memory \(targets <= 1\.0 cpu, <= 1\.3 peak\); exit 1$`,
	} {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("output lacks %q:\n%s", p, out)
		}
	}
	if out, code := runIn(t, t.TempDir(), bin, "bench", "lint", "-module", t.TempDir(), "-runs", "1"); code == 0 || !strings.Contains(out, "no go.mod there") {
		t.Errorf("bench lint -module of a directory without go.mod: exit %d\n%s", code, out)
	}
}
