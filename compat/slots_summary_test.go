package compat

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// summaryOf reduces StatusAll's group to what Summaries reports of it;
// Waiting is what StatusAll lists (at most 10).
func summaryOf(g GroupStatus) GroupSummary {
	s := GroupSummary{Group: g.Group, Limit: g.Limit, HasLimit: g.HasLimit, Override: g.Override, OverrideReason: g.OverrideReason,
		Paused: g.Paused, PauseReason: g.PauseReason, Active: g.Active, OverLimit: g.OverLimit, Slots: len(g.Slots), Waiting: len(g.Waiting)}
	for _, sl := range g.Slots {
		if sl.Expired {
			s.Expired++
		}
	}
	return s
}

// checkSummaries compares Summaries with StatusAll group by group, in
// order, and Waiting with the reschedule rows counted by hand.
func checkSummaries(t *testing.T, s *Slots, pool *pgxpool.Pool, round string) {
	t.Helper()
	ctx := t.Context()
	all, err := s.StatusAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := s.Summaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != len(all) {
		t.Errorf("%s: Summaries reports %d groups, StatusAll %d", round, len(sums), len(all))
	}
	waiting := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT group_name, count(*) FROM concurrency_reschedules GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var g string
		var n int
		if err := rows.Scan(&g, &n); err != nil {
			t.Fatal(err)
		}
		waiting[g] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range min(len(sums), len(all)) {
		got, want := sums[i], summaryOf(all[i])
		if got.Waiting != waiting[got.Group] {
			t.Errorf("%s: %q: Waiting %d, the reschedule rows %d", round, got.Group, got.Waiting, waiting[got.Group])
		}
		got.Waiting = min(got.Waiting, 10)
		if got != want {
			t.Errorf("%s: group #%d:\nSummaries %+v\nStatusAll %+v", round, i, got, want)
		}
	}
}

// TestSummariesMatchStatusAll fills the runtime tables with every kind of
// row StatusAll reads (free, held and expired slots, slot rows without a
// limit or with 0, overrides with and without slots, class pauses over
// groups and alone, names that look like a pause but are not, more than 10
// rescheduled jobs, names whose order differs between bytes and the
// database's collation), in the database's default collation and in an ICU
// one, then changes them at random for several rounds, and checks after
// each that Summaries reports exactly what StatusAll shows, in its order.
func TestSummariesMatchStatusAll(t *testing.T) {
	for _, coll := range []struct {
		name string
		opts []testdb.Option
	}{{"default", nil}, {"ICU-en-US", []testdb.Option{testdb.ICU("en-US")}}} {
		t.Run(coll.name, func(t *testing.T) {
			ctx := t.Context()
			ddl := mustResolve(t, slotTestLayout).RuntimeDDL()
			url := testdb.New(t, coll.opts...)
			pool := slotTestPool(t, url, 2)
			for _, stmt := range ddl {
				if _, err := pool.Exec(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			s, err := NewSlots(Pgx(pool), slotTestLayout, SlotsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			exec := func(sql string, args ...any) {
				t.Helper()
				if _, err := pool.Exec(ctx, sql, args...); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			if sums, err := s.Summaries(ctx); err != nil || len(sums) != 0 {
				t.Fatalf("empty tables: %v %v", sums, err)
			}
			slot := func(group string, n int, limit any, state string) {
				t.Helper()
				switch state {
				case "free":
					exec(`INSERT INTO concurrency_slots (group_name, slot, concurrency_limit) VALUES ($1, $2, $3)`, group, n, limit)
				case "held":
					exec(`INSERT INTO concurrency_slots (group_name, slot, job_id, worker_id, concurrency_limit, acquired_at, expires_at) VALUES ($1, $2, 'j', 'w', $3, now(), now() + interval '1 hour')`, group, n, limit)
				case "expired":
					exec(`INSERT INTO concurrency_slots (group_name, slot, job_id, worker_id, concurrency_limit, acquired_at, expires_at) VALUES ($1, $2, 'j', 'w', $3, now() - interval '2 hours', now() - interval '1 hour')`, group, n, limit)
				}
			}
			limit := func(group string, n int, reason string) {
				exec(`INSERT INTO concurrency_limits (group_name, concurrency_limit, reason) VALUES ($1, $2, $3)
ON CONFLICT (group_name) DO UPDATE SET concurrency_limit = excluded.concurrency_limit, reason = excluded.reason`, group, n, reason)
			}
			resched := func(group string, jobs int) {
				exec(`INSERT INTO concurrency_reschedules (job_id, group_name, reschedules, first_at, last_at)
SELECT $1 || '-' || i, $1, i, now() - interval '1 hour', now() FROM generate_series(1, $2) i`, group, jobs)
			}
			// The fixed cases.
			slot("mail::a", 0, 3, "held")
			slot("mail::a", 1, 3, "held")
			slot("mail::a", 2, 3, "expired")
			slot("mail::a", 3, 1, "free")
			slot("mail::b", 0, nil, "held") // no limit asked
			slot("mail::c", 0, 0, "held")   // a limit of 0 is not the code's
			slot("mail::d", 0, 2, "held")
			slot("mail::d", 1, 2, "held")
			slot("mail::d", 2, 5, "expired") // an expired holder's limit counts
			limit("mail::d", 1, "lowered")   // 2 held at or over 1
			limit("mail::e", 4, "no slot")
			limit("mail::f", 0, "maintenance")
			slot("mail::f", 0, 2, "held")
			limit(PauseName("report"), 0, "incident") // over groups of its own
			slot("report::x", 0, 2, "held")
			slot("report::x", 1, 2, "held")
			limit("report::y", 5, "own override, paused")
			slot("report", 0, 1, "expired")
			limit(PauseName("export"), 0, "alone") // a class with nothing else
			limit("a::b::", 2, "not a pause: the class would hold ::")
			limit("::", 1, "not a pause: no class")
			resched("mail::a", 12)
			resched("queue::only", 3)
			for i, g := range []string{"B", "a", "é", "Z::k", "z", "Å::x", "a b", "a-b", "ab"} {
				slot(g, 0, i+1, "held")
			}
			checkSummaries(t, s, pool, "fixed")

			// Random rounds over a few classes and keys.
			rng := rand.New(rand.NewPCG(7, uint64(len(coll.name))))
			classes := []string{"mail", "report", "export", "Mail", "ß"}
			for round := range 6 {
				for range 60 {
					g := classes[rng.IntN(len(classes))]
					if rng.IntN(4) > 0 {
						g += "::k" + fmt.Sprint(rng.IntN(15))
					}
					switch rng.IntN(7) {
					case 0, 1, 2:
						n := rng.IntN(4)
						exec(`DELETE FROM concurrency_slots WHERE group_name = $1 AND slot = $2`, g, n)
						slot(g, n, []any{nil, 0, 1, 2, 3}[rng.IntN(5)], []string{"free", "held", "held", "expired"}[rng.IntN(4)])
					case 3:
						limit(g, rng.IntN(4), "r"+fmt.Sprint(rng.IntN(3)))
					case 4:
						exec(`DELETE FROM concurrency_limits WHERE group_name = $1`, g)
					case 5:
						c, _ := layout.SplitGroupName(g)
						if rng.IntN(2) == 0 {
							limit(PauseName(c), 0, "pause")
						} else {
							exec(`DELETE FROM concurrency_limits WHERE group_name = $1`, PauseName(c))
						}
					case 6:
						exec(`DELETE FROM concurrency_reschedules WHERE group_name = $1`, g)
						resched(g, rng.IntN(13))
					}
				}
				checkSummaries(t, s, pool, fmt.Sprintf("round %d", round))
			}
		})
	}
}
