package compat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/layout"
)

// Executor runs statements. It is the one small interface the runtime uses
// for database access; Pgx and SQL adapt pgx v5 and database/sql handles to
// it, as River's drivers do, so the runtime's core never imports a driver's
// concrete types.
type Executor interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	// Query runs a statement that returns rows.
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	// QueryRow runs a statement that returns at most one row. Scan returns
	// ErrNoRows when there is none.
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// DB is a database handle that can also start a transaction. When the handle
// is already a transaction, Begin starts a nested one (a savepoint) and
// InTx reports true, so the runtime's writes join the caller's transaction.
// Pgx and SQL begin their transactions at READ COMMITTED.
type DB interface {
	Executor
	// Begin starts a transaction (a savepoint inside a transaction).
	Begin(ctx context.Context) (Tx, error)
	// InTx reports whether the handle is the caller's transaction.
	InTx() bool
}

// Tx is a transaction started by DB.Begin.
type Tx interface {
	Executor
	// Commit commits the transaction (releases the savepoint).
	Commit(ctx context.Context) error
	// Rollback aborts the transaction; after Commit it does nothing.
	Rollback(ctx context.Context) error
}

// Rows is a result set.
type Rows interface {
	// Next advances to the next row; false at the end or on an error.
	Next() bool
	// Scan copies the current row's columns into dest.
	Scan(dest ...any) error
	// Err is the error that ended the iteration, if any.
	Err() error
	// Close frees the result set; Next returning false closes it too.
	Close()
}

// Row is a single-row result.
type Row interface {
	// Scan copies the row's columns into dest; ErrNoRows when there is
	// no row.
	Scan(dest ...any) error
}

// ErrNoRows is returned by Row.Scan when the statement returned no row,
// whichever driver is underneath.
var ErrNoRows = errors.New("no rows in result set")

// marked opens a statement with layout.CompatMarker: every statement the
// runtime sends through Pgx and SQL carries it, so that the migration tells
// this runtime's sessions apart from an old application version's.
func marked(sql string) string { return layout.CompatMarker + " " + sql }

// PgxHandle is what *pgxpool.Pool, *pgx.Conn and pgx.Tx have in common.
type PgxHandle interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Pgx adapts a pgx v5 pool, connection or transaction. Given a pgx.Tx, the
// runtime's statements run inside it.
func Pgx(h PgxHandle) DB {
	_, inTx := h.(pgx.Tx)
	return pgxDB{h: h, inTx: inTx}
}

type pgxDB struct {
	h    PgxHandle
	inTx bool
}

func (d pgxDB) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := d.h.Exec(ctx, marked(sql), args...)
	return tag.RowsAffected(), err
}

func (d pgxDB) Query(ctx context.Context, sql string, args ...any) (Rows, error) {
	rows, err := d.h.Query(ctx, marked(sql), args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (d pgxDB) QueryRow(ctx context.Context, sql string, args ...any) Row {
	return pgxRow{d.h.QueryRow(ctx, marked(sql), args...)}
}

// Begin starts a transaction at READ COMMITTED (the admission check needs
// it, whatever the session's default), or a savepoint inside a transaction.
func (d pgxDB) Begin(ctx context.Context) (Tx, error) {
	var tx pgx.Tx
	var err error
	if b, ok := d.h.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}); ok && !d.inTx {
		tx, err = b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	} else {
		tx, err = d.h.Begin(ctx)
	}
	if err != nil {
		return nil, err
	}
	return pgxTx{pgxDB: pgxDB{h: tx, inTx: true}, tx: tx}, nil
}

func (d pgxDB) InTx() bool { return d.inTx }

type pgxTx struct {
	pgxDB
	tx pgx.Tx
}

func (t pgxTx) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }

func (t pgxTx) Rollback(ctx context.Context) error {
	err := t.tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}

type pgxRow struct{ r pgx.Row }

func (r pgxRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNoRows
	}
	return err
}

// SQLHandle is what *sql.DB and *sql.Tx have in common.
type SQLHandle interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SQL adapts a database/sql *sql.DB or *sql.Tx (for PostgreSQL, through
// pgx's stdlib driver or lib/pq). Given a *sql.Tx, the runtime's statements
// run inside it.
func SQL(h SQLHandle) DB { return sqlDB{h: h} }

type sqlDB struct {
	h     SQLHandle
	depth int // savepoint depth inside a *sql.Tx
}

func (d sqlDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.h.ExecContext(ctx, marked(query), args...)
	if err != nil {
		return 0, err
	}
	// Release, Reschedule and ClearLimit decide on the count: a driver that
	// cannot report it must not pass for "no row matched".
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	return n, nil
}

func (d sqlDB) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := d.h.QueryContext(ctx, marked(query), args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (d sqlDB) QueryRow(ctx context.Context, query string, args ...any) Row {
	return sqlRow{d.h.QueryRowContext(ctx, marked(query), args...)}
}

func (d sqlDB) InTx() bool {
	_, ok := d.h.(*sql.Tx)
	return ok
}

func (d sqlDB) Begin(ctx context.Context) (Tx, error) {
	switch h := d.h.(type) {
	case *sql.DB:
		// READ COMMITTED whatever the session's default: the admission
		// check needs it.
		tx, err := h.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, err
		}
		return &sqlTx{sqlDB: sqlDB{h: tx}, commit: tx.Commit, rollback: tx.Rollback}, nil
	case *sql.Tx:
		name := fmt.Sprintf("compat_sp_%d", d.depth+1)
		if _, err := h.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
			return nil, err
		}
		return &sqlTx{
			sqlDB:    sqlDB{h: h, depth: d.depth + 1},
			commit:   func() error { _, err := h.ExecContext(ctx, "RELEASE SAVEPOINT "+name); return err },
			rollback: func() error { _, err := h.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); return err },
		}, nil
	default:
		return nil, fmt.Errorf("compat: cannot begin a transaction on %T; pass a *sql.DB or *sql.Tx", d.h)
	}
}

type sqlTx struct {
	sqlDB
	commit, rollback func() error
	done             bool
}

func (t *sqlTx) Commit(context.Context) error {
	t.done = true
	return t.commit()
}

func (t *sqlTx) Rollback(context.Context) error {
	if t.done {
		return nil
	}
	t.done = true
	err := t.rollback()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

type sqlRows struct{ r *sql.Rows }

func (r sqlRows) Next() bool             { return r.r.Next() }
func (r sqlRows) Scan(dest ...any) error { return r.r.Scan(dest...) }
func (r sqlRows) Err() error             { return r.r.Err() }
func (r sqlRows) Close()                 { _ = r.r.Close() }

type sqlRow struct{ r *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoRows
	}
	return err
}

// batcher is implemented by handles that can pipeline statements. The batch
// runs as one transaction: the caller's, or an implicit one that commits
// when the batch ends.
type batcher interface {
	sendBatch(ctx context.Context, qs []query) error
}

func (d pgxDB) sendBatch(ctx context.Context, qs []query) (err error) {
	b := &pgx.Batch{}
	for _, q := range qs {
		sql := q.mk
		if sql == "" {
			sql = marked(q.sql)
		}
		b.Queue(sql, q.args...)
	}
	br := d.h.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for _, q := range qs {
		if q.scan != nil {
			if err := q.scan(pgxRow{br.QueryRow()}); err != nil {
				return err
			}
			continue
		}
		if q.rows != nil {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			err = q.rows(rows)
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
			if err != nil {
				return err
			}
			continue
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}
