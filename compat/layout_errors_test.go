package compat

import (
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// TestErrorsNameLayoutFieldsNotFlags: compat is a library; its errors say
// which layout.Layout field to set, never a flag of the CLI. A layout that
// does not match the database is refused naming the field.
func TestErrorsNameLayoutFieldsNotFlags(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("layout", flag.ContinueOnError)
	layout.RegisterFlags(fs)
	var flags []string
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, "--"+f.Name) })

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, _ := strconv.Unquote(lit.Value)
			for _, fl := range flags {
				if strings.Contains(s, fl) {
					t.Errorf("%s: a message names the CLI flag %s: %q", fset.Position(lit.Pos()), fl, s)
				}
			}
			return true
		})
	}

	url := testdb.New(t)
	conn := testdb.Connect(t, url)
	if _, err := conn.Exec(t.Context(), `CREATE TABLE jobs (id bigserial PRIMARY KEY, job_type text NOT NULL, concurrency_key text NOT NULL DEFAULT '')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		l    layout.Layout
		want string
	}{
		{layout.PlainJobs(), `table "public"."plainjobs_jobrequest" not found; check layout.Layout.RequestsTable and Schema`},
		{layout.Layout{Schema: "public", JobsTable: "jobs", ClassColumn: "job_type", StateColumn: "status", ActiveStates: []string{"pending"}}, `has no state column "status"; set layout.Layout.StateColumn`},
		{layout.Layout{Schema: "public", JobsTable: "jobs", ClassColumn: "kind", StateColumn: "status", ActiveStates: []string{"pending"}}, `has no class column "kind"; set layout.Layout.ClassColumn`},
	} {
		client, err := NewClient(Pgx(conn), c.l)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Enqueue(t.Context(), Job{Class: "Mailer"})
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "--") {
			t.Errorf("%+v: %v; want ErrSchema saying %q", c.l, err, c.want)
		}
	}
}
