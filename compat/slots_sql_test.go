package compat

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
)

// TestSlotsOverDatabaseSQL runs the slot API through the database/sql
// adapter: nullable scans, arrays and transactions work with either driver.
func TestSlotsOverDatabaseSQL(t *testing.T) {
	t.Parallel()
	url := slotTestDB(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	s, err := NewSlots(SQL(db), slotTestLayout, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := slotMustAcquire(t, s, "Sql::k", 1, "j1", time.Minute)
	slotMustBeBusy(t, s, "Sql::k", 1, "j2")
	if _, err := s.Extend(ctx, a, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLimit(ctx, "Sql::k", 3, "more"); err != nil {
		t.Fatal(err)
	}
	b := slotMustAcquire(t, s, "Sql::k", 1, "j2", time.Minute)
	if b.Slot != 1 || b.Limit != 3 {
		t.Fatalf("lease %+v under the override", b)
	}
	st, err := s.Status(ctx, "Sql::k")
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.StatusAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != 2 || st.Limit != 3 || !st.Override || len(all) != 1 || all[0].Active != 2 {
		t.Fatalf("status %+v, all %+v", st, all)
	}
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, a); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("second release: %v", err)
	}
}

// TestSQLExecReportsAnUnknownRowCount: a release whose driver cannot say how
// many rows it changed is an error, never a lost lease (which would make a
// worker abandon a slot it still holds).
func TestSQLExecReportsAnUnknownRowCount(t *testing.T) {
	t.Parallel()
	db, mock, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := NewSlots(SQL(db), slotTestLayout, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	noCount := errors.New("driver: no row count")
	mock.ExpectExec("UPDATE").WillReturnResult(sqlmock.NewErrorResult(noCount))
	err = s.Release(t.Context(), Lease{Group: "Sql::k", Slot: 0, Token: 7})
	if !errors.Is(err, noCount) || errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release without a row count: %v, want the driver's error and not ErrLeaseLost", err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}
