package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/layout"
)

var (
	builtOnce sync.Once
	builtBin  string
	builtErr  error
)

// builtTool builds this command once per test binary, as users do, and
// returns its path (TestMain removes it). Every test that runs the command
// as a program shares this one build: each build links the whole binary,
// seconds of CPU each.
func builtTool(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "migrate-unique-bin-")
		if err != nil {
			builtErr = err
			return
		}
		builtBin = dir + "/migrate-unique"
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			builtErr = errors.New(string(out))
		}
	})
	if builtErr != nil {
		t.Fatalf("go build: %v", builtErr)
	}
	return builtBin
}

// runBin runs the built command and returns its exit code and outputs.
func runBin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(builtTool(t), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// mustJSON runs the built command, which must exit want, and decodes its
// stdout, which must be exactly one JSON object, into v (unknown fields
// are an error: the schema is what the docs say).
func mustJSON(t *testing.T, want int, v any, args ...string) string {
	t.Helper()
	code, out, errOut := runBin(t, args...)
	if code != want {
		t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v: stdout is not the documented JSON object: %v\n%s", args, err, out)
	}
	if dec.More() {
		t.Fatalf("%v: stdout holds more than one JSON value:\n%s", args, out)
	}
	return errOut
}

// TestConcurrencyStatusCountsJobsAndPausesAClass: status shows a group's
// queued and running jobs from the queue's tables next to its limit, its
// override and its slots (text and JSON); pause stops the class's keyless
// and keyed jobs in admission and slot acquisition (through compat), status
// shows it, and resume lifts it.
func TestConcurrencyStatusCountsJobsAndPausesAClass(t *testing.T) {
	db := plainJobsDB(t)
	if code, out, errOut := runCLI(t, "up", "--database", db); code != 0 {
		t.Fatalf("up: %d\n%s%s", code, out, errOut)
	}
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c, err := compat.NewClient(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	slots, err := compat.NewSlots(compat.Pgx(pool), layout.PlainJobs(), compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const class = "runbook.Charge"
	group := class + "::c-8"
	enqueue := func(v any) compat.Result {
		t.Helper()
		res, err := c.Enqueue(ctx, compat.Job{Class: class, Value: v})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for range 3 {
		if !enqueue(compat.Limit("c-8", 3)).Inserted() {
			t.Fatal("a job of c-8 was refused under its limit 3")
		}
	}
	// One of them starts: its request becomes a process row.
	if _, err := pool.Exec(ctx, `WITH r AS (DELETE FROM plainjobs_jobrequest WHERE id = (SELECT min(id) FROM plainjobs_jobrequest WHERE concurrency_key = 'c-8') RETURNING *)
INSERT INTO plainjobs_jobprocess (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, job_request_uuid, started_at)
SELECT now(), gen_random_uuid(), job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, uuid, now() FROM r`); err != nil {
		t.Fatal(err)
	}
	var set changeJSON
	mustJSON(t, 0, &set, "concurrency", "set", group, "--limit", "2", "--reason", "card processor slow", "--json", "--database", db)
	if set.Command != "set" || set.Group != group || set.Class != "" || !set.Changed || set.Limit == nil || *set.Limit != 2 || set.Reason != "card processor slow" ||
		set.HoldersOverLimit == nil || *set.HoldersOverLimit != 0 || set.Message != "group runbook.Charge::c-8: limit 2 (override)" {
		t.Fatalf("set --json: %+v", set)
	}
	if _, ok, err := slots.Acquire(ctx, group, 3, "job-1", "w1", 60e9); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}

	var st statusJSON
	mustJSON(t, 0, &st, "concurrency", "status", group, "--json", "--database", db)
	if len(st.Groups) != 1 || len(st.PausedClasses) != 0 || st.QueueNote != "" {
		t.Fatalf("status --json: %+v", st)
	}
	g := st.Groups[0]
	if g.Group != group || g.Class != class || g.Key != "c-8" || g.Limit == nil || *g.Limit != 2 || g.LimitSource != "override" ||
		!g.Override || g.OverrideReason != "card processor slow" || g.Paused || g.PauseReason != "" ||
		g.Queued == nil || *g.Queued != 2 || g.Running == nil || *g.Running != 1 ||
		g.SlotsHeld != 1 || g.SlotsOverLimit != 0 || len(g.Slots) != 1 || g.Slots[0].JobID != "job-1" || len(g.RescheduledJobs) != 0 || len(g.LockHolders) != 0 {
		t.Fatalf("status --json group: %+v", g)
	}
	code, out, _ := runBin(t, "concurrency", "status", "--database", db)
	if code != 0 || !strings.Contains(out, "GROUP                LIMIT                              QUEUED  RUNNING  SLOTS HELD  OVER LIMIT  RESCHEDULED") ||
		!strings.Contains(out, "runbook.Charge::c-8  2 (override: card processor slow)  2       1        1           0           0") {
		t.Fatalf("status: %d\n%s", code, out)
	}

	code, out, errOut := runBin(t, "concurrency", "pause", class, "--reason", "incident 7", "--database", db)
	if code != 0 || !strings.Contains(out, "class runbook.Charge paused: no job of the class is admitted or started: neither its keyless jobs (group runbook.Charge) nor any keyed group (runbook.Charge::KEY, every key)") {
		t.Fatalf("pause: %d %q %q", code, out, errOut)
	}
	for _, v := range []any{struct{}{}, compat.Limit("", 9), compat.Limit("c-8", 3), compat.Limit("c-9", 3), compat.Identity{Key: "c-10"}} {
		if res := enqueue(v); res.Inserted() || res.Skipped.Limit != 0 {
			t.Errorf("enqueue %+v while the class is paused: %+v", v, res.Skipped)
		}
	}
	for _, g := range []string{class, group, class + "::c-9"} {
		if _, ok, err := slots.Acquire(ctx, g, 3, "job-x", "w1", 60e9); err != nil || ok {
			t.Errorf("acquire %s while paused: %v %v", g, ok, err)
		}
	}
	st = statusJSON{}
	mustJSON(t, 0, &st, "concurrency", "status", "--json", "--database", db)
	if len(st.PausedClasses) != 1 || st.PausedClasses[0].Class != class || st.PausedClasses[0].Reason != "incident 7" || st.PausedClasses[0].Since.IsZero() {
		t.Fatalf("status --json paused classes: %+v", st.PausedClasses)
	}
	byName := map[string]groupJSON{}
	for _, g := range st.Groups {
		byName[g.Group] = g
	}
	for _, name := range []string{class, group} {
		g := byName[name]
		if !g.Paused || g.PauseReason != "incident 7" || g.Limit == nil || *g.Limit != 0 || g.LimitSource != "class_pause" {
			t.Errorf("status --json %s while paused: %+v", name, g)
		}
	}
	code, out, _ = runBin(t, "concurrency", "status", "--database", db)
	if code != 0 || !strings.Contains(out, "class runbook.Charge is PAUSED since") || !strings.Contains(out, "0 (class paused: incident 7)") {
		t.Fatalf("status while paused: %d\n%s", code, out)
	}
	if code, _, errOut := runBin(t, "concurrency", "pause", group, "--database", db); code != 2 || !strings.Contains(errOut, "a pause takes the class alone (runbook.Charge)") {
		t.Errorf("pause of a group: %d %q", code, errOut)
	}
	var pause changeJSON
	mustJSON(t, 0, &pause, "concurrency", "pause", class, "--reason", "incident 7", "--json", "--database", db)
	if pause.Command != "pause" || pause.Class != class || pause.Group != "" || !pause.Changed || pause.Reason != "incident 7" || pause.Limit != nil ||
		!strings.HasPrefix(pause.Message, "class runbook.Charge was already paused (reason updated): no job of the class is admitted or started") {
		t.Errorf("pause --json of a paused class: %+v", pause)
	}
	var release changeJSON
	mustJSON(t, 0, &release, "concurrency", "release", group, "0", "--force", "--json", "--database", db)
	if release.Command != "release" || release.Group != group || !release.Changed || release.Slot != 0 || release.JobID != "job-1" || release.WorkerID != "w1" || release.Token <= 0 ||
		!strings.HasPrefix(release.Message, "freed slot 0 of group runbook.Charge::c-8: job job-1 on worker w1") {
		t.Errorf("release --json: %+v", release)
	}

	if code, out, errOut := runBin(t, "concurrency", "resume", class, "--database", db); code != 0 || !strings.Contains(out, "class runbook.Charge resumed") {
		t.Fatalf("resume: %d %q %q", code, out, errOut)
	}
	if res := enqueue(compat.Limit("c-9", 3)); !res.Inserted() {
		t.Errorf("enqueue after resume: %+v", res.Skipped)
	}
	if res := enqueue(compat.Limit("c-8", 3)); res.Inserted() || res.Skipped.Limit != 2 {
		t.Errorf("the group's own override after resume: %+v", res.Skipped)
	}
	var resume changeJSON
	mustJSON(t, 0, &resume, "concurrency", "resume", class, "--json", "--database", db)
	if resume.Command != "resume" || resume.Class != class || resume.Changed || resume.Message != "class runbook.Charge was not paused; nothing changed" {
		t.Errorf("second resume --json: %+v", resume)
	}
}

// TestReadmeInstallLineWorks runs README's install line from the clone's
// root, as written, into a temporary GOBIN, and the binary it installs.
func TestReadmeInstallLineWorks(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "go install ") {
			line = strings.TrimSpace(l)
			break
		}
	}
	args := strings.Fields(strings.SplitN(line, "#", 2)[0])
	if len(args) != 3 || args[2] != "./cmd/migrate-unique" {
		t.Fatalf("README's install line is %q, want go install ./cmd/migrate-unique", line)
	}
	gobin := t.TempDir()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	out, err := exec.Command(gobin+"/migrate-unique", "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "migrate-unique ") {
		t.Fatalf("the installed binary: %v\n%s", err, out)
	}
}

// TestDocsGiveNoBrokenCommand: no page tells the reader to install a
// version that is not published, or to pass go vet an empty -vettool.
func TestDocsGiveNoBrokenCommand(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append(pages, "../../README.md") {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			lower := strings.ToLower(line)
			if strings.Contains(line, "migrate-unique@latest") ||
				strings.Contains(line, "vettool=$(which") && !strings.Contains(lower, "never") && !strings.HasPrefix(strings.TrimSpace(line), "`-vettool=$(which") {
				t.Errorf("%s:%d: %s", page, i+1, line)
			}
		}
	}
}

// TestNoise: the small things a first operator tripped on.
func TestNoise(t *testing.T) {
	// A bad flag value says what is wrong in one line, not the whole help.
	code, out, errOut := runBin(t, "concurrency", "set", "G", "--limit", "abc", "--database", "postgres://x@127.0.0.1:1/x")
	if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, `invalid value "abc" for flag --limit`) ||
		!strings.Contains(errOut, "run 'migrate-unique concurrency set -h' for its flags") || strings.Contains(errOut, "Usage:") {
		t.Errorf("--limit abc: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// -h still prints the whole help.
	if code, _, errOut := runBin(t, "plan", "-h"); code != 0 || !strings.Contains(errOut, "Usage: migrate-unique plan") || !strings.Contains(errOut, "-summary") {
		t.Errorf("plan -h: exit %d\n%s", code, errOut)
	}

	goIn := func(dir string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(builtTool(t), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(b), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b), 0
	}
	// One finding is "1 finding".
	one := t.TempDir()
	writeFiles(t, one, map[string]string{
		"go.mod": "module example.com/one\n\ngo 1.22\n",
		"one.go": "package one\n\ntype J struct{}\n\nfunc (J) UniqueKey() string { return \"k\" }\nfunc (J) Run() error        { return nil }\n",
	})
	if out, code := goIn(one, "lint", "./..."); code != 1 || !strings.Contains(out, "\n1 finding, 1 with a fix") {
		t.Errorf("lint with one finding: exit %d\n%s", code, out)
	}
	// A module that does not build: each error once.
	broken := t.TempDir()
	writeFiles(t, broken, map[string]string{
		"go.mod":    "module example.com/broken\n\ngo 1.22\n",
		"broken.go": "package broken\n\ntype J struct{}\n\nfunc (J) UniqueKey() string { return undefinedThing }\nfunc (J) Run() error        { return nil }\n",
	})
	if out, code := goIn(broken, "rewrite", "-diff", "./..."); code != 2 || strings.Count(out, "undefined: undefinedThing") != 1 {
		t.Errorf("rewrite of a broken module: exit %d, want 2 and the error once:\n%s", code, out)
	}
}
