package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// childEnv makes the test binary run one command line as the real command
// does (see TestMain); childPauseEnv makes that run wait before step N,
// after recording its intent, until it is interrupted.
const (
	childEnv      = "MIGRATE_UNIQUE_TEST_CHILD"
	childPauseEnv = "MIGRATE_UNIQUE_TEST_PAUSE_BEFORE_STEP"
)

func childMain(args []string) int {
	// Off a terminal a step prints no line as it starts: the tests wait
	// for its progress lines instead, which come this often.
	progressEvery = 200 * time.Millisecond
	if n, _ := strconv.Atoi(os.Getenv(childPauseEnv)); n > 0 {
		beforeStep = func(ctx context.Context, s migrations.StepResult) {
			if s.Number == n {
				fmt.Fprintf(os.Stderr, "paused before step %d\n", n)
				<-ctx.Done()
			}
		}
	}
	return runProcess(&env{stdout: os.Stdout, stderr: os.Stderr, isTerminal: isTerminal(os.Stdout)}, args)
}

// child is a command line running in a child process.
type child struct {
	cmd            *exec.Cmd
	mu             sync.Mutex
	stdout, stderr strings.Builder
	lines          chan string // every line of both outputs
	done           chan struct{}
	code           int
}

// startChild runs the command line in a child process of the test binary,
// paused before step pause (0: not paused).
func startChild(t *testing.T, pause int, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", fmt.Sprintf("%s=%d", childPauseEnv, pause))
	return startCommand(t, cmd)
}

// startCommand starts cmd, collecting its output line by line.
func startCommand(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	outR, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	read := func(r io.Reader, into *strings.Builder) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c.mu.Lock()
			into.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
	}
	wg.Add(2)
	go read(outR, &c.stdout)
	go read(errR, &c.stderr)
	go func() {
		wg.Wait()
		_ = c.cmd.Wait()
		c.code = c.cmd.ProcessState.ExitCode()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// waitLine waits for an output line matching re.
func (c *child) waitLine(t *testing.T, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l := <-c.lines:
			if rx.MatchString(l) {
				return
			}
		case <-c.done:
			t.Fatalf("the child exited %d before printing %q:\n%s", c.code, re, c.output())
		case <-timeout:
			t.Fatalf("the child did not print %q:\n%s", re, c.output())
		}
	}
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout.String() + c.stderr.String()
}

// interrupt sends sig and waits for the child to exit: SIGINT and SIGTERM
// must end it with exit 1 and say it was interrupted; SIGKILL ends it at
// once.
func (c *child) interrupt(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the child did not exit after %v:\n%s", sig, c.output())
	}
	if sig != syscall.SIGKILL && (c.code != 1 || !strings.Contains(c.output(), "interrupted")) {
		t.Fatalf("after %v the child exited %d, want 1 saying it was interrupted:\n%s", sig, c.code, c.output())
	}
}

func teamQueueDB(t *testing.T) string {
	t.Helper()
	return testdb.New(t, testdb.FromTemplate(legacy.TeamQueue.Key(200), func(ctx context.Context, url string) error {
		return legacy.TeamQueue.LoadURL(ctx, url, 200)
	}))
}

// teamQueueFlags select legacy.TeamQueue's layout.
var teamQueueFlags = []string{"--schema", "Billing Queue", "--class-column", "kind", "--requests-table", "JobRequests", "--processes-table", "job_processes"}

func cli(t *testing.T, db string, args ...string) (int, string) {
	t.Helper()
	code, out, errOut := runCLI(t, append(append(args, teamQueueFlags...), "--database", db)...)
	return code, out + errOut
}

// mustCLI runs a command line that must succeed.
func mustCLI(t *testing.T, db string, args ...string) string {
	t.Helper()
	code, out := cli(t, db, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d:\n%s", args, code, out)
	}
	return out
}

// comparable renders a database's snapshot without what differs between
// two databases that went through the same migration (the version table's
// timestamps).
func comparable(t *testing.T, db string) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(dbSnapshot(t, db), "\n") {
		if !strings.HasPrefix(l, `rows "Billing Queue".migrate_unique_version `) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// stepCount runs plan (up) or a stopped down to count the steps that have
// work to do: it returns their numbers.
func workSteps(t *testing.T, out string, direction string) []int {
	t.Helper()
	var nums []int
	for _, m := range regexp.MustCompile(`(?m)^step (\d+)/\d+: .*: done in `).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		nums = append(nums, n)
	}
	if len(nums) < 4 {
		t.Fatalf("%s ran only steps %v:\n%s", direction, nums, out)
	}
	return nums
}

// Interrupted before any step with work to do, by SIGINT or SIGKILL, with
// no lock holder in the way, up and down leave a state that status names
// (which run stopped at which step), and a re-run of either direction ends
// exactly where one clean run does.
func TestInterruptedRunsBetweenStepsRecover(t *testing.T) {
	ref := teamQueueDB(t)
	legacySnap := comparable(t, ref)
	upSteps := workSteps(t, mustCLI(t, ref, "up"), "up")
	migratedSnap := comparable(t, ref)
	downSteps := workSteps(t, mustCLI(t, ref, "down"), "down")
	if got := comparable(t, ref); got != legacySnap {
		t.Fatalf("a clean round trip did not restore the database:\n%s\nvs\n%s", legacySnap, got)
	}
	for _, direction := range []string{"up", "down"} {
		steps := map[string][]int{"up": upSteps, "down": downSteps}[direction]
		for _, k := range steps {
			for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
				t.Run(fmt.Sprintf("%s/step %d/%v", direction, k, sig), func(t *testing.T) {
					t.Parallel()
					db := teamQueueDB(t)
					if direction == "down" {
						mustCLI(t, db, "up")
					}
					c := startChild(t, k, append(append([]string{direction}, teamQueueFlags...), "--database", db)...)
					c.waitLine(t, fmt.Sprintf("^paused before step %d$", k))
					c.interrupt(t, sig)
					st := mustCLI(t, db, "status")
					stoppedAt := fmt.Sprintf("stopped:  a%s %s run stopped at step %s %d/", map[string]string{"up": "n", "down": ""}[direction], direction, direction, k)
					if direction == "up" && k == 1 {
						if !strings.Contains(st, "state:    legacy") {
							t.Fatalf("status after up stopped before its first step:\n%s", st)
						}
					} else if !strings.Contains(st, "state:    partly migrated") || !strings.Contains(st, stoppedAt) {
						t.Fatalf("status does not say %q:\n%s", stoppedAt, st)
					}
					// Finish it, then take it the other way and back: each
					// ends exactly as a clean run.
					want := map[string]string{"up": migratedSnap, "down": legacySnap}
					other := map[string]string{"up": "down", "down": "up"}
					mustCLI(t, db, direction)
					if got := comparable(t, db); got != want[direction] {
						t.Fatalf("re-run of %s after an interruption differs from a clean run:\n%s\nvs\n%s", direction, want[direction], got)
					}
					mustCLI(t, db, other[direction])
					if got := comparable(t, db); got != want[other[direction]] {
						t.Fatalf("%s after the recovered %s differs from a clean run", other[direction], direction)
					}
				})
			}
		}
	}
}

// backendOf returns the pid of the server session a child's run opened.
func backendOf(t *testing.T, conn *pgx.Conn, c *child) int {
	t.Helper()
	var pid int
	err := conn.QueryRow(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1 ORDER BY backend_start LIMIT 1",
		fmt.Sprintf("migrate-unique %% pid=%d %%", c.cmd.Process.Pid)).Scan(&pid)
	if err != nil {
		t.Fatalf("the child's session: %v", err)
	}
	return pid
}

// waitBlocked waits until the server session pid waits for a lock.
func waitBlocked(t *testing.T, conn *pgx.Conn, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var waiting bool
		if err := conn.QueryRow(context.Background(), "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d never waited for a lock", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Interrupted inside a step while another session holds a lock on the
// queue (an index build waits for it, the cutover backs off), by SIGINT
// or SIGKILL: status says which run stopped where and what is left (an
// invalid index, or the orphaned server session of the killed run, named
// with its pid, statement and age and the command that ends it, never
// "another run"), and once the holder is gone a re-run ends exactly where
// a clean run does.
func TestInterruptedRunsInsideAStepRecover(t *testing.T) {
	ref := teamQueueDB(t)
	legacySnap := comparable(t, ref)
	mustCLI(t, ref, "up")
	migratedSnap := comparable(t, ref)
	cases := []struct {
		direction string
		// wait returns once the child is inside the step.
		wait func(t *testing.T, conn *pgx.Conn, c *child)
		what string
	}{
		{"up", func(t *testing.T, conn *pgx.Conn, c *child) {
			c.waitLine(t, `^counting index on "Billing Queue"."JobRequests": `)
			waitBlocked(t, conn, backendOf(t, conn, c))
		}, "index build"},
		{"down", func(t *testing.T, conn *pgx.Conn, c *child) {
			c.waitLine(t, `^rebuild unique rule .*: `)
			waitBlocked(t, conn, backendOf(t, conn, c))
		}, "unique rebuild"},
		{"up", func(t *testing.T, conn *pgx.Conn, c *child) {
			c.waitLine(t, `^step cutover.*: attempt 1/\d+: `)
		}, "cutover backoff"},
		{"down", func(t *testing.T, conn *pgx.Conn, c *child) {
			c.waitLine(t, `^step cutover back.*: attempt 1/\d+: `)
		}, "cutover backoff"},
	}
	for _, tc := range cases {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
			t.Run(fmt.Sprintf("%s %s/%v", tc.direction, tc.what, sig), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				db := teamQueueDB(t)
				conn := testdb.Connect(t, db)
				if tc.direction == "down" {
					mustCLI(t, db, "up")
				}
				if tc.what == "cutover backoff" {
					// Build the indexes first (up's counting indexes, down's
					// unique rule) so that the holder only stops the cutover.
					step := map[string]int{"up": 4, "down": 2}[tc.direction]
					c := startChild(t, step, append(append([]string{tc.direction}, teamQueueFlags...), "--database", db)...)
					c.waitLine(t, fmt.Sprintf("^paused before step %d$", step))
					c.interrupt(t, syscall.SIGINT)
				}
				holder, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer holder.Rollback(ctx) //nolint:errcheck
				// A writer's lock (that changes no row): index builds wait for it.
				if _, err := holder.Exec(ctx, `UPDATE "Billing Queue"."JobRequests" SET priority = priority WHERE false`); err != nil {
					t.Fatal(err)
				}
				if tc.what == "cutover backoff" {
					time.Sleep(300 * time.Millisecond) // older than the first attempt's wait: a long holder
				}
				probe := testdb.Connect(t, db)
				c := startChild(t, 0, append(append([]string{tc.direction}, teamQueueFlags...), "--lock-timeout", "200ms", "--max-attempts", "1000", "--database", db)...)
				tc.wait(t, probe, c)
				c.interrupt(t, sig)

				st := mustCLI(t, db, "status")
				stopped := map[string]string{"up": "stopped:  an up run stopped at step up ", "down": "stopped:  a down run stopped at step down "}[tc.direction]
				if !strings.Contains(st, "state:    partly migrated") || !strings.Contains(st, stopped) {
					t.Fatalf("status after the interruption:\n%s", st)
				}
				if sig == syscall.SIGINT && tc.what != "cutover backoff" {
					// The cancelled build left its index INVALID (for down, the
					// unique rule: it still rejects duplicates of new rows).
					invalid := map[string]string{"up": "invalid indexes of ours: JobRequests.JobRequests_concurrency_key_idx", "down": "invalid indexes of ours: JobRequests.JobRequests_Kind_UniqueKey_uniq"}[tc.direction]
					if !strings.Contains(st, invalid) {
						t.Errorf("status does not show %q:\n%s", invalid, st)
					}
				}
				if sig == syscall.SIGKILL && tc.what != "cutover backoff" {
					// The server goes on with the killed run's build, holding
					// the run lock: named as orphaned, with the command to end it.
					code, out := cli(t, db, tc.direction)
					m := regexp.MustCompile(`pg_terminate_backend\((\d+)\)`).FindStringSubmatch(out)
					if code != 1 || !strings.Contains(out, "an orphaned session holds this layout's run lock") || !strings.Contains(out, "CONCURRENTLY") || m == nil || strings.Contains(out, "another migrate-unique run") {
						t.Fatalf("re-run while the killed run's build goes on: exit %d:\n%s", code, out)
					}
					if !strings.Contains(st, "run lock: an orphaned session") {
						t.Errorf("status does not name the orphaned session:\n%s", st)
					}
					if _, err := probe.Exec(ctx, "SELECT pg_terminate_backend($1)", m[1]); err != nil {
						t.Fatal(err)
					}
				}
				if err := holder.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"up": migratedSnap, "down": legacySnap}
				other := map[string]string{"up": "down", "down": "up"}
				rerun := func() {
					// The terminated session may take a moment to release its lock.
					for range 100 {
						code, out := cli(t, db, tc.direction)
						if code == 0 {
							return
						}
						if !strings.Contains(out, "run lock") && !strings.Contains(out, "another migrate-unique run") {
							t.Fatalf("re-run of %s: exit %d:\n%s", tc.direction, code, out)
						}
						time.Sleep(50 * time.Millisecond)
					}
					t.Fatalf("the run lock was never released")
				}
				rerun()
				if got := comparable(t, db); got != want[tc.direction] {
					t.Fatalf("re-run of %s after the interruption differs from a clean run:\n%s\nvs\n%s", tc.direction, want[tc.direction], got)
				}
				mustCLI(t, db, other[tc.direction])
				if got := comparable(t, db); got != want[other[tc.direction]] {
					t.Fatalf("%s after the recovered %s differs from a clean run", other[tc.direction], tc.direction)
				}
			})
		}
	}
}

// Two runs started at once on one layout, in two processes: one works and
// the other refuses naming it (or, started after the first finished, finds
// nothing to do); never both half-way. The layout ends exactly as after
// one clean run, both ways.
func TestTwoConcurrentRuns(t *testing.T) {
	ref := teamQueueDB(t)
	legacySnap := comparable(t, ref)
	mustCLI(t, ref, "up")
	migratedSnap := comparable(t, ref)
	db := teamQueueDB(t)
	for _, direction := range []string{"up", "down"} {
		var cs []*child
		for range 2 {
			cs = append(cs, startChild(t, 0, append(append([]string{direction}, teamQueueFlags...), "--database", db)...))
		}
		worked := 0
		for _, c := range cs {
			<-c.done
			out := c.output()
			switch {
			case c.code == 0 && strings.Contains(out, direction+": "):
				worked++
			case c.code == 0 && (strings.Contains(out, "nothing to do") || strings.Contains(out, "nothing to roll back")):
			case c.code == 1 && strings.Contains(out, "another migrate-unique run is working on this layout (backend pid"):
			default:
				t.Fatalf("concurrent %s: exit %d:\n%s", direction, c.code, out)
			}
		}
		if worked != 1 {
			t.Fatalf("concurrent %s: %d runs did the work, want 1", direction, worked)
		}
		want := map[string]string{"up": migratedSnap, "down": legacySnap}[direction]
		if got := comparable(t, db); got != want {
			t.Fatalf("after two concurrent %s runs the database differs from one clean run:\n%s\nvs\n%s", direction, want, got)
		}
	}
}

// A run that holds the layout (here paused between two steps) makes a
// second one refuse before any change, naming the first run's session and
// process; the first then finishes.
func TestSecondRunNamesTheFirst(t *testing.T) {
	db := teamQueueDB(t)
	first := startChild(t, 2, append(append([]string{"up"}, teamQueueFlags...), "--database", db)...)
	first.waitLine(t, "^paused before step 2$")
	before := comparable(t, db)
	for _, direction := range []string{"up", "down"} {
		code, out := cli(t, db, direction)
		want := fmt.Sprintf("started by process %d on host ", first.cmd.Process.Pid)
		if code != 1 || !strings.Contains(out, "another migrate-unique run is working on this layout (backend pid ") || !strings.Contains(out, want) || !strings.Contains(out, "pg_terminate_backend(") {
			t.Fatalf("%s while another run holds the layout: exit %d:\n%s", direction, code, out)
		}
	}
	if got := comparable(t, db); got != before {
		t.Fatalf("a refused run changed the database")
	}
	first.interrupt(t, syscall.SIGINT)
	mustCLI(t, db, "up")
	if st := mustCLI(t, db, "status"); !strings.Contains(st, "state:    migrated") {
		t.Fatalf("status after the first run finished:\n%s", st)
	}
}
