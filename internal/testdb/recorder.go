package testdb

import (
	"context"
	"regexp"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
)

// Recorder is a pgx query and batch tracer that records the text of every
// statement sent on the connections it traces: give it to a command with
// pgurl.WithTracer, or to a pgx.ConnConfig as its Tracer.
type Recorder struct {
	mu   sync.Mutex
	sqls []string
}

func (r *Recorder) add(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sqls = append(r.sqls, sql)
}

// Statements returns the distinct statements recorded, in the order first
// sent.
func (r *Recorder) Statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, s := range r.sqls {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// TraceQueryStart records the statement.
func (r *Recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL)
	return ctx
}

// TraceQueryEnd does nothing.
func (r *Recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing.
func (r *Recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records the batch's statement.
func (r *Recorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(d.SQL)
}

// TraceBatchEnd does nothing.
func (r *Recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// resolvesNothing matches the statements that resolve no function, operator
// or type: pgx's transaction control, and the search_path pin itself
// (pgurl.PinTx).
var resolvesNothing = regexp.MustCompile(`^(?i:begin|commit|rollback|(release |rollback to )?savepoint \w+|SET LOCAL search_path = pg_catalog, pg_temp)$`)

// Unqualified returns, for each statement recorded that names a function,
// operator or type the way qualify.SQL would rewrite it (a bare operator,
// an unqualified call or cast, or a construct it refuses), the reason and
// the statement: empty when every one resolves in pg_catalog whatever the
// search path.
func (r *Recorder) Unqualified() []string {
	var out []string
	for _, s := range r.Statements() {
		if resolvesNothing.MatchString(s) {
			continue
		}
		if err := qualify.Check(s); err != nil {
			out = append(out, err.Error()+"\n"+s)
		}
	}
	return out
}
