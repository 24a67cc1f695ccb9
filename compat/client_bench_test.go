package compat

import (
	"context"
	"strconv"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// BenchmarkEnqueueClientWork measures compat's own client work per enqueue:
// identity, validation, JSON, lock plan, statement texts and arguments,
// results, metrics and logging no-ops, with no driver underneath (cannedDB
// answers every statement at once with the row the server would send). The
// catalog is read once from plain-jobs' migrated tables. What it leaves out,
// pgx's encoding, the protocol and the server, is what bench/peers measures
// (docs/performance.md, "Admission against its floor").
//
//	go test -run '^$' -bench EnqueueClientWork -benchmem ./compat/
func BenchmarkEnqueueClientWork(b *testing.B) {
	ctx := context.Background()
	url := testdb.New(b)
	if err := legacy.PlainJobs.LoadURL(ctx, url, 0); err != nil {
		b.Fatal(err)
	}
	migrate(b, url, legacy.PlainJobs.Layout)
	conn, err := testdb.Dial(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	c, err := NewClient(Pgx(conn), legacy.PlainJobs.Layout)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.loadSchema(ctx, c.db); err != nil {
		b.Fatal(err)
	}
	job := func(i int) Job {
		k := "k" + strconv.Itoa(i)
		return Job{Class: "bench", Value: Limit(k, 1), Args: map[string]string{"key": k}}
	}
	for _, blocked := range []bool{false, true} {
		name := "single/admitted"
		if blocked {
			name = "single/blocked"
		}
		b.Run(name, func(b *testing.B) {
			db := cannedDB{blocked: blocked}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				res, err := c.EnqueueTx(ctx, db, job(i))
				if err != nil || res.Inserted() == blocked {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
	b.Run("batch of 100/admitted", func(b *testing.B) {
		db := cannedDB{}
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			jobs := make([]Job, 100)
			for i := range jobs {
				n++
				jobs[i] = job(n)
			}
			if _, err := c.EnqueueManyTx(ctx, db, jobs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cannedDB is a DB whose pipelined batches answer at once: the lock
// statement returns nothing, a single count-and-insert one row (admitted:
// id and uuid; blocked: the limit, the count and a holder), a batch's
// count-and-insert one inserted row per job.
type cannedDB struct {
	DB
	blocked bool
}

func (cannedDB) InTx() bool { return false }

func (d cannedDB) sendBatch(_ context.Context, qs []query) error {
	for _, q := range qs {
		switch {
		case q.scan != nil:
			row := cannedRow{int32(1), int64(0), "", int64(7), "9b2f6c1e-0000-4000-8000-000000000007"}
			if d.blocked {
				row = cannedRow{int32(1), int64(1), "plainjobs_jobrequest:5", nil, nil}
			}
			if err := q.scan(row); err != nil {
				return err
			}
		case q.rows != nil:
			if err := q.rows(&cannedRows{n: 100}); err != nil {
				return err
			}
		}
	}
	return nil
}

// cannedRow scans its values into the destinations the admission passes.
type cannedRow []any

func (r cannedRow) Scan(dest ...any) error {
	for i, d := range dest {
		switch d := d.(type) {
		case *int64:
			*d = r[i].(int64)
		case *string:
			*d = r[i].(string)
		case **int32:
			*d = nil
			if v, ok := r[i].(int32); ok {
				*d = &v
			}
		case **int64:
			*d = nil
			if v, ok := r[i].(int64); ok {
				*d = &v
			}
		case **string:
			*d = nil
			if v, ok := r[i].(string); ok {
				*d = &v
			}
		}
	}
	return nil
}

// cannedRows are a batch statement's rows: n inserted rows.
type cannedRows struct{ n, i int }

func (r *cannedRows) Next() bool { r.i++; return r.i <= r.n }

func (r *cannedRows) Scan(dest ...any) error {
	id, uuid := int64(r.i), "9b2f6c1e-0000-4000-8000-000000000007"
	*dest[0].(*bool) = true
	*dest[5].(**int64), *dest[6].(**string) = &id, &uuid
	return nil
}

func (*cannedRows) Err() error { return nil }
func (*cannedRows) Close()     {}
