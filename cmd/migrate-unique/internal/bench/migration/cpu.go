package migration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// backendCPU accounts the CPU of a migration run's server backends, when
// the server runs on this machine (its backends' /proc/<pid>/schedstat is
// readable): the time each ran on a CPU and the time each waited, runnable,
// for one. On a shared machine a step's wall time is that CPU, plus that
// wait (the load), plus I/O and lock waits; the CPU does not depend on the
// load.
type backendCPU struct {
	conn *pgx.Conn
	pids []int
	// run and wait are the sums over pids when the step began.
	run, wait time.Duration
	ok        bool
}

// begin finds the run's backends by their application_name (migrations
// names each session "migrate-unique <direction> pid=<this process> host=…")
// and reads their counters.
func (b *backendCPU) begin(ctx context.Context, direction string) {
	b.ok = false
	rows, err := b.conn.Query(ctx, `SELECT pid FROM pg_catalog.pg_stat_activity
WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database() AND pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
  AND pg_catalog.starts_with(application_name, $1::text)`, fmt.Sprintf("migrate-unique %s pid=%d ", direction, os.Getpid()))
	if err != nil {
		return
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		return
	}
	b.pids = b.pids[:0]
	for _, p := range pids {
		// A server on another machine: a local process may have its pid.
		if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(int(p)) + "/cmdline"); err != nil || !strings.Contains(string(cmd), "postgres") {
			return
		}
		b.pids = append(b.pids, int(p))
	}
	b.run, b.wait, b.ok = b.read()
}

// end returns the CPU the run's backends used since begin and the time
// they waited for a CPU; ok is false when either was not readable.
func (b *backendCPU) end() (cpu, wait time.Duration, ok bool) {
	if !b.ok {
		return 0, 0, false
	}
	run, w, ok := b.read()
	if !ok {
		return 0, 0, false
	}
	return run - b.run, w - b.wait, true
}

// read sums /proc/<pid>/schedstat's first two fields (nanoseconds on a
// CPU, nanoseconds waiting on a run queue) over the backends.
func (b *backendCPU) read() (run, wait time.Duration, ok bool) {
	for _, pid := range b.pids {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
		if err != nil {
			return 0, 0, false
		}
		f := strings.Fields(string(data))
		if len(f) < 2 {
			return 0, 0, false
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		w, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		run += time.Duration(r)
		wait += time.Duration(w)
	}
	return run, wait, true
}

// loadAverage is this machine's 1-minute load average ("" when unknown).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return ""
}
