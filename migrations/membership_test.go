package migrations_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// asRole adds options=-c%20role%3DROLE (-c role=ROLE) to a database URL: the session becomes
// ROLE from its start, which a member with SET may do.
func asRole(t *testing.T, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		t.Fatalf("not a URL: %v", err)
	}
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "options=-c%20role%3D" + url.QueryEscape(role)
	return u.String()
}

// planAs plans as the role of dbURL and checks the rule that plan never
// both refuses and notes as whom up would create its tables.
func planAs(t *testing.T, dbURL string, l layout.Layout) (fatal, notes []migrations.Finding) {
	t.Helper()
	p, err := migrations.Plan(context.Background(), dbURL, l)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	for _, f := range p.Findings {
		if f.Fatal {
			fatal = append(fatal, f)
		} else {
			notes = append(notes, f)
		}
	}
	for _, n := range notes {
		if n.Kind == "creator" && len(fatal) > 0 {
			t.Errorf("plan refuses and also notes as whom up would create its tables:\nnote: %s\nrefusals: %v", n.Message, fatal)
		}
	}
	return fatal, notes
}

func findingOfKind(fs []migrations.Finding, kind string) *migrations.Finding {
	for i := range fs {
		if fs[i].Kind == kind {
			return &fs[i]
		}
	}
	return nil
}

// tablesOwner is the owner of the runtime's limits table.
func tablesOwner(t *testing.T, dbURL string, l layout.Resolved) string {
	t.Helper()
	var owner string
	if err := testdb.Connect(t, dbURL).QueryRow(context.Background(), "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = $1::regclass", l.Table(layout.LimitsTable)).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

// TestMembershipOptions runs plan and up as a member of the queue's owner
// with each combination of PostgreSQL 16's membership options (GRANT owner
// TO member WITH INHERIT x, SET y): INHERIT gives the owner's privileges
// (up needs them), SET lets the member become the owner (up creates its
// tables as it). Where up refuses, the refusal's action is the exact
// statement that fixes an existing membership (a plain GRANT leaves it as
// it is), and running it makes up pass. Before 16 the older server's
// switch is the member's NOINHERIT attribute: that is tested instead.
func TestMembershipOptions(t *testing.T) {
	s := legacy.PlainJobs
	l := s.Resolved
	if testdb.Major(t) < 16 {
		testdb.Adapted(t, "membership options (INHERIT, SET) are PostgreSQL 16's: the member's NOINHERIT attribute instead, the older server's way of holding a membership without its privileges")
		dbURL := legacyDB(t, s)
		roles := testdb.ManagedRoles(t, dbURL, l.Schema)
		admin := testdb.Connect(t, dbURL)
		if _, err := admin.Exec(context.Background(), "ALTER ROLE "+roles.Migrator+" NOINHERIT"); err != nil {
			t.Fatal(err)
		}
		fatal, _ := planAs(t, roles.MigratorURL, s.Layout)
		own := findingOfKind(fatal, "ownership")
		if own == nil || own.Action != "ALTER ROLE "+roles.Migrator+" INHERIT" || !strings.Contains(own.Message, "options=-c%20role%3D"+roles.Owner) {
			t.Fatalf("a NOINHERIT member: ownership refusal %+v; want the action ALTER ROLE ... INHERIT and the role option; all: %v", own, fatal)
		}
		if fatal, _ := planAs(t, asRole(t, roles.MigratorURL, roles.Owner), s.Layout); len(fatal) > 0 {
			t.Errorf("connected as the owner (options=-c role=...), plan refuses: %v", fatal)
		}
		if _, err := admin.Exec(context.Background(), own.Action); err != nil {
			t.Fatal(err)
		}
		if fatal, _ := planAs(t, roles.MigratorURL, s.Layout); len(fatal) > 0 {
			t.Fatalf("after %s, plan refuses: %v", own.Action, fatal)
		}
		if _, err := migrations.Up(context.Background(), roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, tc := range []struct {
		name         string
		inherit, set bool
	}{
		{"INHERIT_TRUE_SET_TRUE", true, true},
		{"INHERIT_FALSE_SET_TRUE", false, true},
		{"INHERIT_TRUE_SET_FALSE", true, false},
		{"INHERIT_FALSE_SET_FALSE", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dbURL := legacyDB(t, s)
			roles := testdb.ManagedRoles(t, dbURL, l.Schema)
			admin := testdb.Connect(t, dbURL)
			grant := "GRANT " + roles.Owner + " TO " + roles.Migrator + " WITH INHERIT " + map[bool]string{true: "TRUE", false: "FALSE"}[tc.inherit] + ", SET " + map[bool]string{true: "TRUE", false: "FALSE"}[tc.set]
			if _, err := admin.Exec(ctx, grant); err != nil {
				t.Fatal(err)
			}
			fatal, notes := planAs(t, roles.MigratorURL, s.Layout)
			creator := findingOfKind(notes, "creator")
			switch {
			case tc.inherit && tc.set:
				if len(fatal) > 0 || creator == nil || !strings.Contains(creator.Message, "up creates its tables as "+roles.Owner+", the owner") {
					t.Fatalf("refusals %v, creator note %+v; want none, and the tables made as the owner", fatal, creator)
				}
			case tc.inherit:
				// The owner's privileges, but no SET ROLE: up works and
				// creates as the member; the note names the statement that
				// would make them the owner's.
				want := "GRANT " + roles.Owner + " TO " + roles.Migrator + " WITH SET TRUE"
				if len(fatal) > 0 || creator == nil || creator.Action != want || !strings.Contains(creator.Message, "up creates its tables as "+roles.Migrator+", not as the queue's owner") {
					t.Fatalf("refusals %v, creator note %+v; want none, and a note whose action is %q", fatal, creator, want)
				}
				if _, err := admin.Exec(ctx, creator.Action); err != nil {
					t.Fatal(err)
				}
				if _, notes := planAs(t, roles.MigratorURL, s.Layout); findingOfKind(notes, "creator") == nil || !strings.Contains(findingOfKind(notes, "creator").Message, "up creates its tables as "+roles.Owner+", the owner") {
					t.Fatalf("after %s the tables are still not the owner's: %v", creator.Action, notes)
				}
				if _, err := admin.Exec(ctx, grant); err != nil { // back to SET FALSE: up as it was planned
					t.Fatal(err)
				}
			default:
				want := "GRANT " + roles.Owner + " TO " + roles.Migrator + " WITH INHERIT TRUE"
				own := findingOfKind(fatal, "ownership")
				if own == nil || own.Action != want || !strings.Contains(own.Message, "leaves the existing membership as it is") {
					t.Fatalf("ownership refusal %+v, want one whose action is %q; all: %v", own, want, fatal)
				}
				if tc.set != strings.Contains(own.Message, "options=-c%20role%3D"+roles.Owner) {
					t.Errorf("SET %v: the refusal offers connecting as the owner: %v; want it offered exactly when the member may become it:\n%s", tc.set, !tc.set, own.Message)
				}
				if sc := findingOfKind(fatal, "schema_create"); sc != nil {
					t.Errorf("a second refusal for the same cause (the owner's CREATE comes with INHERIT): %s", sc.Message)
				}
				if tc.set {
					// SET alone: a session that becomes the owner runs up.
					asOwner := asRole(t, roles.MigratorURL, roles.Owner)
					if fatal, _ := planAs(t, asOwner, s.Layout); len(fatal) > 0 {
						t.Fatalf("connected as the owner (options=-c role=...), plan refuses: %v", fatal)
					}
					if _, err := migrations.Up(ctx, asOwner, s.Layout, migrations.Options{}); err != nil {
						t.Fatalf("up connected as the owner: %v", err)
					}
					if got := tablesOwner(t, dbURL, l); got != roles.Owner {
						t.Errorf("up as the owner made tables owned by %s", got)
					}
					if _, err := migrations.Down(ctx, asOwner, s.Layout, migrations.Options{}); err != nil {
						t.Fatalf("down connected as the owner: %v", err)
					}
				}
				if _, err := admin.Exec(ctx, own.Action); err != nil {
					t.Fatal(err)
				}
				fatal, _ = planAs(t, roles.MigratorURL, s.Layout)
				if len(fatal) > 0 {
					t.Fatalf("after %s, plan still refuses: %v", own.Action, fatal)
				}
			}
			if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
				t.Fatalf("up: %v", err)
			}
			wantOwner := roles.Owner
			if !tc.set { // no SET ROLE: up creates as the member
				wantOwner = roles.Migrator
			}
			if got := tablesOwner(t, dbURL, l); got != wantOwner {
				t.Errorf("the runtime's tables belong to %s, want %s", got, wantOwner)
			}
			newAppRuntime(t, roles.AppURL, s.Layout).enqueue("after up")
			if _, err := migrations.Down(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
				t.Fatalf("down: %v", err)
			}
		})
	}
}
