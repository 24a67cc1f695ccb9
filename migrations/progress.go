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
// redrawn bar on a terminal, a line every ProgressEvery otherwise.
func (r *runner) watchProgress(ctx context.Context, name string) (stop func()) {
	if r.opts.Out == nil {
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
		if r.opts.Terminal {
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
			if r.opts.Terminal {
				fmt.Fprintf(r.opts.Out, "\r%s %s", progressBar(p.fraction(), 30), p.describe())
				drawn = true
			} else {
				fmt.Fprintf(r.opts.Out, "%s: %s\n", name, p.describe())
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

type progress struct {
	phase                     string
	blocksTotal, blocksDone   int64
	tuplesTotal, tuplesDone   int64
	lockersTotal, lockersDone int64
}

func readProgress(ctx context.Context, conn *pgx.Conn, pid uint32) (progress, bool) {
	var p progress
	err := conn.QueryRow(ctx, `SELECT phase, blocks_total, blocks_done, tuples_total, tuples_done, lockers_total, lockers_done
FROM pg_stat_progress_create_index WHERE pid = $1`, int32(pid)).Scan(&p.phase, &p.blocksTotal, &p.blocksDone, &p.tuplesTotal, &p.tuplesDone, &p.lockersTotal, &p.lockersDone)
	return p, err == nil
}

func (p progress) fraction() float64 {
	switch {
	case p.blocksTotal > 0:
		return float64(p.blocksDone) / float64(p.blocksTotal)
	case p.tuplesTotal > 0:
		return float64(p.tuplesDone) / float64(p.tuplesTotal)
	case p.lockersTotal > 0:
		return float64(p.lockersDone) / float64(p.lockersTotal)
	}
	return 0
}

func (p progress) describe() string {
	s := fmt.Sprintf("%3.0f%% %s", 100*p.fraction(), p.phase)
	switch {
	case p.blocksTotal > 0:
		s += fmt.Sprintf(" (%d/%d blocks)", p.blocksDone, p.blocksTotal)
	case p.tuplesTotal > 0:
		s += fmt.Sprintf(" (%d/%d tuples)", p.tuplesDone, p.tuplesTotal)
	case p.lockersTotal > 0:
		s += fmt.Sprintf(" (waiting for %d/%d older transactions)", p.lockersTotal-p.lockersDone, p.lockersTotal)
	}
	return s
}

func progressBar(f float64, width int) string {
	n := int(f * float64(width))
	n = max(0, min(n, width))
	return "[" + strings.Repeat("#", n) + strings.Repeat(" ", width-n) + "]"
}
