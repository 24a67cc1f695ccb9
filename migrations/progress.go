package migrations

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// watchProgress reports the index build of the run's backend from
// pg_stat_progress_create_index until the returned stop is called: a
// redrawn bar on a terminal, a line every ProgressEvery otherwise, and
// OnProgress.
func (r *runner) watchProgress(ctx context.Context, name string) (stop func()) {
	if r.opts.Out == nil && r.opts.OnProgress == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := r.connect(ctx)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		every := r.opts.ProgressEvery
		if r.opts.Terminal && r.opts.Out != nil {
			every = 250 * time.Millisecond
		}
		t := time.NewTicker(every)
		defer t.Stop()
		drawn := false
		for {
			select {
			case <-ctx.Done():
				if drawn {
					fmt.Fprintln(r.opts.Out)
				}
				return
			case <-t.C:
			}
			p, ok := readProgress(ctx, conn, r.pid)
			if !ok {
				continue
			}
			p.Step = name
			if r.opts.OnProgress != nil {
				r.opts.OnProgress(p)
			}
			switch {
			case r.opts.Out == nil:
			case r.opts.Terminal:
				fmt.Fprintf(r.opts.Out, "\r%s %s\033[K", progressBar(p.Fraction, 30), p.describe())
				drawn = true
			default:
				fmt.Fprintf(r.opts.Out, "%s: %s\n", name, p.describe())
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// Progress is one reading of an index build (pg_stat_progress_create_index).
type Progress struct {
	// Step names the step that builds the index.
	Step string `json:"step"`
	// Phase is PostgreSQL's phase name ("building index: scanning table",
	// "waiting for old snapshots", ...).
	Phase string `json:"phase"`
	// Fraction is the phase's progress, 0 to 1 (0 when it has no measure).
	Fraction float64 `json:"fraction"`
	// BlocksDone/Total, TuplesDone/Total and LockersDone/Total are the
	// phase's counters (0 when it has none).
	BlocksDone   int64 `json:"blocks_done"`
	BlocksTotal  int64 `json:"blocks_total"`
	TuplesDone   int64 `json:"tuples_done"`
	TuplesTotal  int64 `json:"tuples_total"`
	LockersDone  int64 `json:"lockers_done"`
	LockersTotal int64 `json:"lockers_total"`
	// WaitingFor is the session the build waits for in a waiting phase
	// (an older transaction or snapshot), nil otherwise.
	WaitingFor *Blocker `json:"waiting_for"`
}

// Blocker is a session an index build waits for.
type Blocker struct {
	// PID is its backend's process id (pg_terminate_backend ends it).
	PID int `json:"pid"`
	// State is pg_stat_activity's state; TransactionAge how long its
	// transaction has been open; Query its current or last statement.
	State          string        `json:"state"`
	TransactionAge time.Duration `json:"transaction_age"`
	Query          string        `json:"query"`
}

func readProgress(ctx context.Context, conn *pgx.Conn, pid uint32) (Progress, bool) {
	var p Progress
	var lockerPID int
	var state, query *string
	var age *float64
	err := conn.QueryRow(ctx, `SELECT p.phase, p.blocks_total, p.blocks_done, p.tuples_total, p.tuples_done, p.lockers_total, p.lockers_done,
    coalesce(p.current_locker_pid, 0)::int, a.state, left(a.query, 200), extract(epoch FROM clock_timestamp() - a.xact_start)::float8
FROM pg_stat_progress_create_index p LEFT JOIN pg_stat_activity a ON a.pid = p.current_locker_pid AND p.current_locker_pid <> 0
WHERE p.pid = $1`, int32(pid)).Scan(&p.Phase, &p.BlocksTotal, &p.BlocksDone, &p.TuplesTotal, &p.TuplesDone, &p.LockersTotal, &p.LockersDone,
		&lockerPID, &state, &query, &age)
	if err != nil {
		return p, false
	}
	if lockerPID != 0 && strings.HasPrefix(p.Phase, "waiting") {
		b := &Blocker{PID: lockerPID}
		if state != nil {
			b.State = *state
		}
		if query != nil {
			b.Query = *query
		}
		if age != nil {
			b.TransactionAge = time.Duration(*age * float64(time.Second)).Round(time.Millisecond)
		}
		p.WaitingFor = b
	}
	p.Fraction = p.fraction()
	return p, true
}

func (p Progress) fraction() float64 {
	switch {
	case p.BlocksTotal > 0:
		return float64(p.BlocksDone) / float64(p.BlocksTotal)
	case p.TuplesTotal > 0:
		return float64(p.TuplesDone) / float64(p.TuplesTotal)
	case p.LockersTotal > 0:
		return float64(p.LockersDone) / float64(p.LockersTotal)
	}
	return 0
}

func (p Progress) describe() string {
	s := fmt.Sprintf("%3.0f%% %s", 100*p.Fraction, p.Phase)
	switch {
	case p.BlocksTotal > 0:
		s += fmt.Sprintf(" (%d/%d blocks)", p.BlocksDone, p.BlocksTotal)
	case p.TuplesTotal > 0:
		s += fmt.Sprintf(" (%d/%d tuples)", p.TuplesDone, p.TuplesTotal)
	case p.LockersTotal > 0:
		s += fmt.Sprintf(" (waiting for %d/%d older transactions)", p.LockersTotal-p.LockersDone, p.LockersTotal)
	}
	if b := p.WaitingFor; b != nil {
		s += fmt.Sprintf(": waiting for pid %d, %s, in a transaction for %s", b.PID, b.State, b.TransactionAge.Round(time.Second))
		if b.Query != "" {
			s += fmt.Sprintf(", last query %q", b.Query)
		}
		s += fmt.Sprintf("; the build goes on when it ends (SELECT pg_terminate_backend(%d) ends it)", b.PID)
	}
	return s
}

func progressBar(f float64, width int) string {
	n := int(f * float64(width))
	n = max(0, min(n, width))
	return "[" + strings.Repeat("#", n) + strings.Repeat(" ", width-n) + "]"
}
