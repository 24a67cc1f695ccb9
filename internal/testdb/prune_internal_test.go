package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

// PruneTemplates drops a template unused for longer than the limit and one
// that never recorded a use, and keeps one used recently and one whose lock
// another session holds (it is being built or used); EnsureTemplate records
// each use in the template's comment. The test's templates are named outside
// mu_tmpl_*, and pruned by their own pattern, so that another test process
// on the same server (whose first EnsureTemplate prunes mu_tmpl_*) never
// drops them first, and this test never drops that process's templates.
func TestPruneTemplatesDropsOnlyUnusedOnes(t *testing.T) {
	srv, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := Dial(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) }) // after the drops registered below
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	suffix := hex.EncodeToString(rnd[:])
	month := time.Now().Add(-30 * 24 * time.Hour)
	prefix := "mu_prunetest_" + suffix + "_"
	templates := map[string]*time.Time{ // name -> last use recorded (nil: none)
		prefix + "stale":     &month,
		prefix + "nocomment": nil,
		prefix + "fresh":     new(time.Now()),
		prefix + "held":      &month,
	}
	for name, used := range templates {
		for _, sql := range []string{"CREATE DATABASE " + layout.Ident(name) + " TEMPLATE template0",
			"ALTER DATABASE " + layout.Ident(name) + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			_, _ = admin.Exec(context.Background(), "ALTER DATABASE "+layout.Ident(name)+" WITH IS_TEMPLATE false")
			_, _ = admin.Exec(context.Background(), dropDatabase(name))
		})
		if used != nil {
			if _, err := admin.Exec(ctx, "COMMENT ON DATABASE "+layout.Ident(name)+" IS "+layout.Literal(templatePrefix+used.UTC().Format(time.RFC3339))); err != nil {
				t.Fatal(err)
			}
		}
	}
	holder, err := Dial(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock(prefix+"held")); err != nil {
		t.Fatal(err)
	}

	dropped, err := srv.pruneTemplates(ctx, 7*24*time.Hour, strings.ReplaceAll(prefix, "_", `\_`)+"%")
	if err != nil {
		t.Fatal(err)
	}
	for name := range templates {
		var exists bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		wantGone := name == prefix+"stale" || name == prefix+"nocomment"
		if exists == wantGone || slices.Contains(dropped, name) != wantGone {
			t.Errorf("%s: exists %v, reported dropped %v; want dropped %v (dropped: %v)", name, exists, slices.Contains(dropped, name), wantGone, dropped)
		}
	}

	// A use is recorded.
	name, err := srv.EnsureTemplate(ctx, "prune test "+suffix, func(context.Context, string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "ALTER DATABASE "+layout.Ident(name)+" WITH IS_TEMPLATE false")
		_, _ = admin.Exec(context.Background(), dropDatabase(name))
	})
	var comment *string
	if err := admin.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&comment); err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	if used, ok := templateLastUsed(comment); !ok || time.Since(used) > time.Minute {
		t.Fatalf("template %s: comment %v does not record a use just now", name, comment)
	}
}
