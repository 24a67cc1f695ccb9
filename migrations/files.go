package migrations

import (
	"embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/migrate-unique/migrate-unique/internal/layout"
)

// PlainJobsFiles holds Files(layout.PlainJobs()) as committed in plainjobs/,
// for teams that apply migrations with golang-migrate (see PlainJobsSource).
//
//go:embed plainjobs/*.sql
var PlainJobsFiles embed.FS

// PlainJobsSource is a golang-migrate source driver over PlainJobsFiles.
// Give golang-migrate its own version table (x-migrations-table), so it
// never touches the application's schema_migrations.
func PlainJobsSource() (source.Driver, error) {
	return iofs.New(PlainJobsFiles, "plainjobs")
}

// plainJobsRebuild is plain-jobs' own unique rule as pg_get_indexdef renders
// it after the rename: Files can build it CONCURRENTLY without asking the
// database. A test pins it against what the cutover saves.
const plainJobsRebuild = `CREATE UNIQUE INDEX CONCURRENTLY plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, concurrency_key) WHERE ((retry_attempt = 0) AND ((concurrency_key)::text > ''::text))`

const nothingToDo = "-- Nothing to do in this direction.\n"

// Files renders the migration of l as golang-migrate files: file name (for
// example 000003_create_plainjobs_jobrequest_concurrency_key_idx.up.sql) to
// SQL. Every statement that involves CONCURRENTLY is alone in its file;
// nothing uses x-multi-statement or x-statement-timeout. Every file that
// takes an ACCESS EXCLUSIVE lock bounds its wait with a lock_timeout of
// DefaultLockTimeout set inside its own transaction.
//
// For plain-jobs' layout the down files rebuild its unique rule
// CONCURRENTLY. For any other layout the rule is only known from the
// database, so its down file rebuilds the saved rule inside a transaction:
// on a busy queue, roll back with Down instead.
func Files(l layout.Layout) (map[string]string, error) {
	l = l.WithDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	d := newTmplData(l, DefaultLockTimeout)
	files := map[string]string{}
	n := 0
	add := func(title, up, down string) {
		n++
		base := fmt.Sprintf("%06d_%s", n, fileTitle(title))
		files[base+".up.sql"] = up
		files[base+".down.sql"] = down
	}
	var err error
	r := func(name string, d tmplData) string {
		s, rerr := render(name, d)
		if err == nil {
			err = rerr
		}
		return s
	}
	add("version_table", r("version_table.up.sql.tmpl", d), r("version_table.down.sql.tmpl", d))
	for _, ci := range countingIndexes(l) {
		dd := d
		dd.Index = l.Table(ci.name)
		drop := "-- An invalid leftover of an interrupted build would make the next file fail: drop it first.\n" + r("drop_index.sql.tmpl", dd)
		add("drop_invalid_"+ci.name, drop, nothingToDo)
		create, cerr := ci.createSQL(l, layout.LegacyKeyColumn)
		if cerr != nil {
			return nil, cerr
		}
		add("create_"+ci.name, create, r("drop_index.sql.tmpl", dd))
	}
	add("cutover", r("cutover.up.sql.tmpl", d), r("cutover.down.sql.tmpl", d))
	var rebuild string
	if isPlainJobs(l) {
		dd := d
		dd.Definition = plainJobsRebuild
		rebuild = "-- plain-jobs' unique rule, rebuilt online before the cutover back attaches it.\n" + r("rebuild.down.sql.tmpl", dd)
	} else {
		rebuild = r("rebuild_saved.down.sql.tmpl", d)
	}
	add("unique_rule", nothingToDo, rebuild)
	add("runtime_tables", r("runtime.up.sql.tmpl", d), r("runtime.down.sql.tmpl", d))
	if d.SkipTable != "" {
		add("skip_column", r("skip_column.up.sql.tmpl", d), "-- The skip-metadata column is dropped with the runtime tables, unless it holds skip records.\n")
	}
	add("analyze", r("analyze.up.sql.tmpl", d), nothingToDo)
	add("duplicate_check", nothingToDo, r("duplicates.down.sql.tmpl", d))
	add("finish", r("finish.up.sql.tmpl", d), nothingToDo)
	if err != nil {
		return nil, err
	}
	return files, nil
}

var unsafeTitle = regexp.MustCompile(`[^a-z0-9_]+`)

func fileTitle(s string) string {
	return strings.Trim(unsafeTitle.ReplaceAllString(strings.ToLower(s), "_"), "_")
}

// isPlainJobs reports plain-jobs' own layout, whose unique rule is known.
func isPlainJobs(l layout.Layout) bool {
	pj := layout.PlainJobs().WithDefaults()
	return l.Schema == pj.Schema && l.ClassColumn == pj.ClassColumn && l.RequestsTable == pj.RequestsTable &&
		l.ProcessesTable == pj.ProcessesTable && l.ResultsTable == pj.ResultsTable && !l.SingleTable()
}
