package dependents_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

const seedRows = 30

// queue returns a fresh database holding the legacy schema s, seeded, with
// setup (the dependent objects a test is about) run on it.
func queue(t *testing.T, s legacy.Schema, setup string) string {
	t.Helper()
	url := testdb.New(t, testdb.FromTemplate(s.Key(seedRows), func(ctx context.Context, url string) error {
		return s.LoadURL(ctx, url, seedRows)
	}))
	if setup != "" {
		exec(t, url, setup)
	}
	return url
}

func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	conn := testdb.Connect(t, url)
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// state is what a refusal must leave as it was.
type state struct {
	versionTable bool
	columns      []string // table.column of every key column of the layout
	indexes      []string // every index definition in the layout's schema
}

func readState(t *testing.T, url string, s legacy.Schema) state {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Connect(t, url)
	l := s.Resolved
	var st state
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", l.Table(layout.VersionTable)).Scan(&st.versionTable); err != nil {
		t.Fatal(err)
	}
	collect := func(sql string, args ...any) []string {
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	st.columns = collect(`SELECT c.relname || '.' || a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY ($2) AND a.attname IN ('unique_key', 'concurrency_key') AND NOT a.attisdropped`, l.Schema, l.Tables())
	st.indexes = collect(`SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, l.Schema)
	return st
}

func (st state) String() string {
	return fmt.Sprintf("version table %v, columns %v, indexes:\n  %s", st.versionTable, st.columns, strings.Join(st.indexes, "\n  "))
}

// expectRefused checks that plan lists a refusal saying every one of want
// and that up refuses the same way, changing nothing: no version table,
// the column still unique_key, every index (the unique rule among them)
// still there.
func expectRefused(t *testing.T, url string, s legacy.Schema, want ...string) {
	t.Helper()
	before := readState(t, url, s)
	if before.versionTable || !strings.Contains(strings.Join(before.columns, " "), "unique_key") {
		t.Fatalf("not a legacy queue: %s", before)
	}
	plan, err := migrations.Plan(context.Background(), url, s.Layout)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if !hasFinding(plan.Findings, true, want...) {
		t.Errorf("plan lists no refusal saying %q; findings:\n%s", want, findings(plan.Findings))
	}
	_, err = migrations.Up(context.Background(), url, s.Layout, migrations.Options{})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("up: %v, want a preflight refusal", err)
	}
	if !contains(err.Error(), want...) {
		t.Errorf("up's refusal does not say %q:\n%v", want, err)
	}
	if after := readState(t, url, s); after.String() != before.String() {
		t.Errorf("a refused up changed the database:\nbefore: %s\nafter:  %s", before, after)
	}
}

// expectCarried checks that plan does not refuse (and notes every one of
// want, when given), then that the application's next INSERT works after
// up and after down.
func expectCarried(t *testing.T, url string, s legacy.Schema, insert func(keyColumn string) string, want ...string) {
	t.Helper()
	ctx := context.Background()
	plan, err := migrations.Plan(ctx, url, s.Layout)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if hasFinding(plan.Findings, true) {
		t.Fatalf("plan refuses:\n%s", findings(plan.Findings))
	}
	for _, w := range want {
		if !hasFinding(plan.Findings, false, w) {
			t.Errorf("plan notes nothing saying %q; findings:\n%s", w, findings(plan.Findings))
		}
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up: %v", err)
	}
	exec(t, url, insert(layout.KeyColumn))
	if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("down: %v", err)
	}
	exec(t, url, insert(layout.LegacyKeyColumn))
}

var keys atomic.Int64

// insertJob is the application's enqueue into the single-table queue,
// naming the key column as it is called at the moment.
func insertJob(keyColumn string) string {
	return fmt.Sprintf("INSERT INTO jobs (job_type, %s) VALUES ('email.send', 'new-%d')", pgx.Identifier{keyColumn}.Sanitize(), keys.Add(1))
}

func hasFinding(fs []migrations.Finding, fatal bool, want ...string) bool {
	for _, f := range fs {
		if f.Fatal == fatal && contains(f.Message, want...) {
			return true
		}
	}
	return false
}

func findings(fs []migrations.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func testdbConn(t *testing.T, url string) *pgx.Conn { return testdb.Connect(t, url) }

// expectNote checks that plan, on a legacy queue, notes every one of want.
func expectNote(t *testing.T, url string, s legacy.Schema, want ...string) {
	t.Helper()
	plan, err := migrations.Plan(context.Background(), url, s.Layout)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if !hasFinding(plan.Findings, false, want...) {
		t.Errorf("plan notes nothing saying %q; findings:\n%s", want, findings(plan.Findings))
	}
}

// planFindings renders plan's findings on the layout of s.
func planFindings(t *testing.T, url string, s legacy.Schema) string {
	t.Helper()
	plan, err := migrations.Plan(context.Background(), url, s.Layout)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return findings(plan.Findings)
}

// appRole creates a role for the test's database (roles are cluster-wide:
// named after the database, dropped at the end), runs grants on it (%[1]s
// is the role) and returns a function that runs SQL as that role.
func appRole(t *testing.T, url, grants string) func(sql string) error {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Connect(t, url)
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	role := pgx.Identifier{db + "_app"}.Sanitize()
	exec(t, url, "CREATE ROLE "+role+" NOLOGIN; "+fmt.Sprintf(grants, role))
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	return func(sql string) error {
		_, err := conn.Exec(ctx, "SET ROLE "+role+"; "+sql)
		_, _ = conn.Exec(ctx, "RESET ROLE")
		return err
	}
}
