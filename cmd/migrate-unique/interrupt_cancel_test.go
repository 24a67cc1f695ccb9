package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// The advisory locks the interruption tests hold to stop a run at a chosen
// place on the server: gateLock stops it at the intent record of a step
// (so that the step's blocker can be taken once the steps before it are
// done), blockLock stops a statement that only a trigger can hold up.
const (
	gateLock  = 7_000_001
	blockLock = 7_000_002
)

// cancelQueue is a legacy queue the interruption tests run on.
type cancelQueue struct {
	name  string
	db    func(*testing.T) string
	flags []string
	// versionTable, requests, processes, results and limits are the
	// quoted tables of its layout (results "" when it has none).
	versionTable, requests, processes, results, limits string
}

var cancelQueues = []cancelQueue{
	{"team queue", teamQueueDB, teamQueueFlags, `"Billing Queue".migrate_unique_version`,
		`"Billing Queue"."JobRequests"`, `"Billing Queue".job_processes`, "", `"Billing Queue".concurrency_limits`},
	{"plain-jobs", plainJobsDB, nil, `public.migrate_unique_version`,
		`public.plainjobs_jobrequest`, `public.plainjobs_jobprocess`, `public.plainjobs_jobresult`, `public.concurrency_limits`},
}

// run runs a command line on the queue's layout in db in this process.
func (q cancelQueue) run(t *testing.T, db string, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, append(append(args, q.flags...), "--database", db)...)
	if code != 0 {
		t.Fatalf("%v: exit %d:\n%s%s", args, code, out, errOut)
	}
	return out + errOut
}

// comparable renders db's snapshot without the version table's rows (their
// timestamps differ between two runs).
func (q cancelQueue) comparable(t *testing.T, db string) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(dbSnapshot(t, db), "\n") {
		if !strings.HasPrefix(l, "rows "+strings.TrimPrefix(q.versionTable, "public.")+" ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// tableOf is the queue table step s works on: named in the step or in the
// index it drops; the results table for the skip-metadata column and its
// probe index.
func (q cancelQueue) tableOf(s workStep) string {
	bare := func(quoted string) string { return strings.Trim(quoted[strings.LastIndex(quoted, ".")+1:], `"`) }
	switch {
	case (strings.HasPrefix(s.name, "skip-metadata column") || strings.HasPrefix(s.name, "probe index")) && q.results != "":
		return q.results
	case strings.Contains(s.name, bare(q.processes)):
		return q.processes
	}
	return q.requests
}

// stepLine is a run's "step N/M: NAME: done in ..." line.
var stepLine = regexp.MustCompile(`^step (\d+)/\d+: (.*): done in `)

type workStep struct {
	number int
	name   string
}

// stepsOf lists the steps with work to do in a run's output.
func stepsOf(t *testing.T, out string) []workStep {
	t.Helper()
	var steps []workStep
	for _, l := range strings.Split(out, "\n") {
		if m := stepLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			steps = append(steps, workStep{n, m[2]})
		}
	}
	if len(steps) < 4 {
		t.Fatalf("the run did only steps %v:\n%s", steps, out)
	}
	return steps
}

// blocker holds, from sessions of its own, what makes one step of a run wait
// on the server, and lets it go.
type blocker struct {
	// what says what the step waits for.
	what string
	// release ends the blocking sessions' transactions and locks.
	release func()
	// lock reports whether an ungranted lock of the run's session is the
	// one this blocker holds (not the gate).
	lock func(locktype string, objid int64) bool
}

// notGate is a blocker's lock test for anything but the gate.
func notGate(locktype string, objid int64) bool {
	return !(locktype == "advisory" && objid == gateLock)
}

// blockStep takes what keeps step s of a run in direction waiting on the
// server: a lock, an uncommitted table of the name the step creates, a
// snapshot older than an index build, or a trigger that waits for an
// advisory lock. oldSnapshot chooses, for an index build, a transaction
// holding an old snapshot (the build waits at its end) instead of a writer
// (the build waits at its start).
func blockStep(t *testing.T, q cancelQueue, db, direction string, s workStep, oldSnapshot bool) *blocker {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Connect(t, db)
	versionTable := q.versionTable
	table := func() string { return q.tableOf(s) }
	inTx := func(what string, iso pgx.TxIsoLevel, stmts ...string) *blocker {
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				t.Fatalf("blocker of %s step %q: %s: %v", direction, s.name, q, err)
			}
		}
		return &blocker{what: what, lock: notGate, release: func() {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			conn.Close(ctx)
		}}
	}
	viaTrigger := func(what, event string, when ...string) *blocker {
		cond := ""
		if len(when) > 0 {
			cond = " WHEN (" + when[0] + ")"
		}
		if _, err := conn.Exec(ctx, `CREATE TRIGGER migrate_unique_test_block BEFORE `+event+` ON `+versionTable+
			` FOR EACH ROW`+cond+` EXECUTE FUNCTION migrate_unique_test_wait_for_lock(`+strconv.Itoa(blockLock)+`)`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", blockLock); err != nil {
			t.Fatal(err)
		}
		return &blocker{what: what, lock: func(locktype string, objid int64) bool { return locktype == "advisory" && objid == blockLock },
			release: func() {
				if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", blockLock); err != nil {
					t.Fatal(err)
				}
				if _, err := conn.Exec(ctx, "DROP TRIGGER IF EXISTS migrate_unique_test_block ON "+versionTable); err != nil {
					t.Fatal(err)
				}
				conn.Close(ctx)
			}}
	}
	switch name := s.name; {
	case name == "version table" && direction == "up":
		return inTx("an uncommitted table of the same name", pgx.ReadCommitted, "CREATE TABLE "+versionTable+" (x int)")
	case name == "version table":
		return viaTrigger("a trigger waiting for a lock", "DELETE")
	case name == "record migrated":
		return viaTrigger("a trigger waiting for a lock", "UPDATE", "NEW.state = 'migrated'")
	case strings.HasPrefix(name, "counting index"), strings.HasPrefix(name, "prefix index"), strings.HasPrefix(name, "rebuild unique rule"),
		strings.HasPrefix(name, "plain-jobs 0007 index"), strings.HasPrefix(name, "probe index"):
		if oldSnapshot {
			return inTx("a transaction with an old snapshot", pgx.RepeatableRead, "SELECT count(*) FROM pg_class")
		}
		return inTx("a writer's open transaction", pgx.ReadCommitted, "UPDATE "+table()+" SET priority = priority WHERE false")
	case strings.HasPrefix(name, "drop "):
		// An index drop names its index, not always its table: read them all.
		reads := []string{"SELECT count(*) FROM " + q.requests, "SELECT count(*) FROM " + q.processes}
		if q.results != "" {
			reads = append(reads, "SELECT count(*) FROM "+q.results)
		}
		return inTx("a reader's open transaction", pgx.ReadCommitted, reads...)
	case strings.HasPrefix(name, "cutover"), strings.HasPrefix(name, "skip-metadata column"):
		return inTx("a reader's open transaction", pgx.ReadCommitted, "SELECT count(*) FROM "+table())
	case name == "runtime tables":
		return inTx("an uncommitted table of the same name", pgx.ReadCommitted, "CREATE TABLE "+q.limits+" (x int)")
	case strings.HasPrefix(name, "runtime tables"):
		return inTx("a reader of a table it drops", pgx.ReadCommitted, "SELECT count(*) FROM "+q.limits)
	case name == "analyze":
		return inTx("a SHARE UPDATE EXCLUSIVE lock", pgx.ReadCommitted, "LOCK TABLE "+q.requests+" IN SHARE UPDATE EXCLUSIVE MODE")
	}
	t.Fatalf("no blocker for %s step %q: teach blockStep this step", direction, s.name)
	return nil
}

// triggerBlocked reports the steps that blockStep stops with a trigger on
// the version table: the last of each direction, whose statement only
// writes that table.
func triggerBlocked(direction string, s workStep) bool {
	return s.name == "record migrated" || direction == "down" && s.name == "version table"
}

// await polls cond until it holds, failing the test after two minutes.
func await(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	awaitWithin(t, 2*time.Minute, what, cond)
}

// awaitWithin polls cond until it holds, failing the test after d.
func awaitWithin(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s in vain until %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runSessions is the pattern of the application_name of every session a
// run in process pid opens.
func runSessions(pid int) string { return fmt.Sprintf("migrate-unique %% pid=%d %%", pid) }

// awaitWaiting waits until the main session of the run in process c (its
// first) waits
// for a lock that lock accepts, and returns that session's pid.
func awaitWaiting(t *testing.T, conn *pgx.Conn, c *child, what string, lock func(string, int64) bool) int {
	t.Helper()
	var pid int
	await(t, "the run waits for "+what, func() (bool, error) {
		select {
		case <-c.done:
			return false, fmt.Errorf("the run exited %d:\n%s", c.code, c.output())
		default:
		}
		rows, err := conn.Query(context.Background(), `SELECT l.pid, l.locktype, coalesce(l.objid::bigint, 0) FROM pg_locks l
WHERE NOT l.granted AND l.pid = (SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1 ORDER BY backend_start LIMIT 1)`,
			runSessions(c.cmd.Process.Pid))
		if err != nil {
			return false, err
		}
		defer rows.Close()
		for rows.Next() {
			var locktype string
			var objid int64
			if err := rows.Scan(&pid, &locktype, &objid); err != nil {
				return false, err
			}
			if lock(locktype, objid) {
				return true, nil
			}
		}
		return false, rows.Err()
	})
	return pid
}

// Interrupted by SIGINT or SIGTERM inside every step of up and down that
// has work to do, on plain-jobs' layout and on the team queue, while the step's statement waits on the server (for a
// lock, for an uncommitted table of the name it creates, or, for an index
// build, for a writer or for a transaction holding an old snapshot), the
// built command cancels the statement on the server and waits for it to
// end before it exits: a few seconds later no session of the run is left
// in pg_stat_activity and the run lock is free, with the blocker still
// there. Interrupted at each step in turn, the layout then ends, after one
// more run, exactly where one clean run leaves it.
func TestInterruptCancelsTheServerStatementInEveryStep(t *testing.T) {
	bin := builtTool(t)
	for _, q := range cancelQueues {
		t.Run(q.name, func(t *testing.T) {
			t.Parallel()
			interruptEveryStep(t, bin, q)
		})
	}
}

func interruptEveryStep(t *testing.T, bin string, q cancelQueue) {
	versionTable := q.versionTable
	ref := q.db(t)
	legacySnap := q.comparable(t, ref)
	upSteps := stepsOf(t, q.run(t, ref, "up"))
	migratedSnap := q.comparable(t, ref)
	downSteps := stepsOf(t, q.run(t, ref, "down"))
	for _, direction := range []string{"up", "down"} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(fmt.Sprintf("%s/%v", direction, sig), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				db := q.db(t)
				if direction == "down" {
					q.run(t, db, "up")
				}
				probe := testdb.Connect(t, db)
				if _, err := probe.Exec(ctx, `CREATE FUNCTION migrate_unique_test_wait_for_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(TG_ARGV[0]::bigint);
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END $$`); err != nil {
					t.Fatal(err)
				}
				steps := map[string][]workStep{"up": upSteps, "down": downSteps}[direction]
				for i, s := range steps {
					// The gate stops the run before step s (named: a re-run
					// lists fewer steps), once the steps before it are
					// done, so that the blocker of s does not stop them;
					// it needs the version table, which up's
					// first step creates.
					var gate *pgx.Conn
					var exists bool
					if err := probe.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", versionTable).Scan(&exists); err != nil {
						t.Fatal(err)
					}
					if exists {
						gate = testdb.Connect(t, db)
						if _, err := gate.Exec(ctx, fmt.Sprintf(`CREATE TRIGGER migrate_unique_test_gate BEFORE UPDATE ON %s FOR EACH ROW
WHEN (NEW.step LIKE '%s %%' AND substr(NEW.step, strpos(NEW.step, ': ') + 2) = '%s') EXECUTE FUNCTION migrate_unique_test_wait_for_lock(%d)`,
							versionTable, direction, strings.ReplaceAll(s.name, "'", "''"), gateLock)); err != nil {
							t.Fatal(err)
						}
						if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", gateLock); err != nil {
							t.Fatal(err)
						}
					}
					// Index builds wait for an old snapshot in every other
					// step, the other signal in the other chain.
					oldSnapshot := (i%2 == 0) == (sig == syscall.SIGINT)
					// A trigger's blocker is taken before the run starts
					// (creating it would wait for the gated run); it stops
					// only its step's statement.
					var b *blocker
					if gate == nil || triggerBlocked(direction, s) {
						b = blockStep(t, q, db, direction, s, oldSnapshot)
					}
					cmd := exec.Command(bin, append(append([]string{direction}, q.flags...), "--lock-timeout", "20m", "--max-attempts", "1", "--database", db)...)
					c := startCommand(t, cmd)
					if gate != nil {
						awaitWaiting(t, probe, c, "the gate before step "+s.name, func(lt string, id int64) bool { return lt == "advisory" && id == gateLock })
						if b == nil {
							b = blockStep(t, q, db, direction, s, oldSnapshot)
						}
						if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", gateLock); err != nil {
							t.Fatal(err)
						}
					}
					awaitWaiting(t, probe, c, b.what+" in step "+s.name, b.lock)
					signalled := time.Now()
					c.interrupt(t, sig)
					t.Logf("%v in step %q, waiting for %s: exited %s later", sig, s.name, b.what, time.Since(signalled).Round(time.Millisecond))
					if strings.Contains(c.output(), "connection to the server was lost") {
						t.Fatalf("%s in step %q: the run did not see its statement end:\n%s", sig, s.name, c.output())
					}
					// With the blocker still there: nothing of the run is
					// left on the server, and the run lock is free.
					awaitWithin(t, 10*time.Second, fmt.Sprintf("no session of the run interrupted in step %q is left", s.name), func() (bool, error) {
						var n int
						err := probe.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1", runSessions(c.cmd.Process.Pid)).Scan(&n)
						return n == 0, err
					})
					if st := q.run(t, db, "status"); strings.Contains(st, "run lock:") {
						t.Fatalf("%s in step %q: the run lock is still held:\n%s", sig, s.name, st)
					}
					b.release()
					if gate != nil {
						if _, err := gate.Exec(ctx, "DROP TRIGGER migrate_unique_test_gate ON "+versionTable); err != nil {
							t.Fatal(err)
						}
						gate.Close(ctx)
					}
				}
				q.run(t, db, direction)
				if _, err := probe.Exec(ctx, "DROP FUNCTION migrate_unique_test_wait_for_lock()"); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"up": migratedSnap, "down": legacySnap}[direction]
				if got := q.comparable(t, db); got != want {
					t.Fatalf("%s after an interruption in every step differs from one clean run:\n%s\nvs\n%s", direction, want, got)
				}
			})
		}
	}
}
