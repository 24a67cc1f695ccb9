// Package legacy holds the legacy queue schemas this project migrates, as
// they exist in the field, each with a seeding companion that fills it with
// realistic rows. The SQL files are the source; this package embeds them for
// the tests and the demo.
package legacy

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

//go:embed *.sql
var files embed.FS

// Schema is one legacy schema.
type Schema struct {
	// Name is the file stem: plainjobs, teamqueue or singletable.
	Name string
	// Layout selects the schema's tables, every default filled in.
	Layout layout.Layout
	// Resolved is Layout resolved, for code that renders SQL.
	Resolved layout.Resolved
	// DDL creates the tables; Seed fills them (see Load).
	DDL, Seed string
}

// The legacy schemas.
var (
	PlainJobs   = mustSchema("plainjobs", layout.PlainJobs())
	TeamQueue   = mustSchema("teamqueue", layout.Layout{Schema: "Billing Queue", ClassColumn: "kind", RequestsTable: "JobRequests", ProcessesTable: "job_processes"})
	SingleTable = mustSchema("singletable", layout.Layout{Schema: "public", ClassColumn: "job_type", JobsTable: "jobs", StateColumn: "status", ActiveStates: []string{"pending", "running", "paused"}})
	// All lists every legacy schema.
	All = []Schema{PlainJobs, TeamQueue, SingleTable}
	// PlainJobs0007 is plain-jobs 0.38.0's own migration 0007 as the
	// statements plain runs on PlainJobs' tables (plainjobs_0007.sql): the
	// reference `up` is compared with.
	PlainJobs0007 = mustRead("plainjobs_0007.sql")
	// PlainJobs0009And0010 are plain-jobs' later migrations that run SQL on
	// the schema 0007 leaves (plainjobs_0009_0010.sql).
	PlainJobs0009And0010 = mustRead("plainjobs_0009_0010.sql")
)

func mustRead(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func mustSchema(name string, l layout.Layout) Schema {
	ddl, err := files.ReadFile(name + ".sql")
	if err != nil {
		panic(err)
	}
	seed, err := files.ReadFile(name + "_seed.sql")
	if err != nil {
		panic(err)
	}
	r, err := l.Resolve()
	if err != nil {
		panic(err)
	}
	return Schema{Name: name, Layout: r.Layout, Resolved: r, DDL: string(ddl), Seed: string(seed)}
}

// Key identifies the schema's content with n rows, for template caching.
func (s Schema) Key(rows int) string {
	sum := sha256.Sum256([]byte(s.DDL + "\x00" + s.Seed))
	return "legacy/" + s.Name + "/" + hex.EncodeToString(sum[:8]) + "/" + strconv.Itoa(rows)
}

// Load creates the schema and seeds it with rows rows (0: empty tables), then
// analyzes the tables.
func (s Schema) Load(ctx context.Context, conn *pgx.Conn, rows int) error {
	if _, err := conn.Exec(ctx, s.DDL); err != nil {
		return fmt.Errorf("create legacy schema %s: %w", s.Name, err)
	}
	if rows <= 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, "SELECT set_config('migrate_unique.seed_rows', $1, false)", strconv.Itoa(rows)); err != nil {
		return fmt.Errorf("seed legacy schema %s: %w", s.Name, err)
	}
	if _, err := conn.Exec(ctx, s.Seed); err != nil {
		return fmt.Errorf("seed legacy schema %s: %w", s.Name, err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze legacy schema %s: %w", s.Name, err)
	}
	return nil
}

// LoadURL is Load on a new connection to url.
func (s Schema) LoadURL(ctx context.Context, url string, rows int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return s.Load(ctx, conn, rows)
}
