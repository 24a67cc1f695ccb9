package groupstatus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/scratch"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestStatementsAreQualified records every statement the package builds
// and sends, on a two-table and a single-table queue (the statements are
// built from the layout at run time): the counts by index probes and in
// one aggregate pass, the key length and group checks, Read, ReadSummaries
// and RuntimeTablesState. Each names its functions, operators and types so
// that they resolve in pg_catalog whatever the search path
// (testdb.Recorder.Unqualified), which through a pooler that refused the
// pinned search_path is what stands between a neighbour's operators and
// the operator's session besides the pinned transaction.
func TestStatementsAreQualified(t *testing.T) {
	for _, s := range []legacy.Schema{legacy.PlainJobs, legacy.SingleTable} {
		t.Run(s.Name, func(t *testing.T) {
			ctx := t.Context()
			url := testdb.New(t)
			q, err := scratch.New(ctx, url, "qualified_test", s)
			if err != nil {
				t.Fatal(err)
			}
			l := q.Layout
			rec := &testdb.Recorder{}
			conn, err := pgurl.Connect(pgurl.WithTracer(ctx, rec), url, "")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			slots, err := compat.NewSlots(compat.Pgx(conn), layout.Layout{Schema: l.Schema, RequestsTable: layout.PlainJobsRequests}, compat.SlotsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := slots.Acquire(ctx, "C::k", 1, "j1", "w1", time.Hour); err != nil || !ok {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			counter, note := groupstatus.NewCounter(ctx, conn, l)
			if counter == nil {
				t.Fatal(note)
			}
			var groups []groupstatus.Group
			for i := range 70 { // more than the probes count: the aggregate
				groups = append(groups, groupstatus.Group{Class: "C", Key: fmt.Sprint("k-", i)})
			}
			for _, gs := range [][]groupstatus.Group{groups[:2], groups} {
				if _, err := counter.CountAll(ctx, conn, gs); err != nil {
					t.Fatalf("count %d groups: %v", len(gs), err)
				}
			}
			if err := groupstatus.CheckKeyLength(ctx, conn, l.Schema, "C::k"); err != nil {
				t.Fatal(err)
			}
			if _, err := groupstatus.GroupKnown(ctx, conn, l.Schema, "C::nothing"); err != nil {
				t.Fatal(err)
			}
			if _, err := groupstatus.Read(ctx, conn, slots, l, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := groupstatus.ReadSummaries(ctx, conn, slots, l); err != nil {
				t.Fatal(err)
			}
			groupstatus.RuntimeTablesState(ctx, conn, l.Schema)
			if n := len(rec.Statements()); n < 10 {
				t.Fatalf("only %d distinct statements recorded", n)
			}
			for _, u := range rec.Unqualified() {
				t.Errorf("%s", u)
			}
		})
	}
}
