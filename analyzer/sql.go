package analyzer

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"strings"
)

// The sql finding's scope. A string literal naming unique_key is reported
// only when it can concern the migrated queue:
//
//   - it names one of the layout's tables (plain-jobs' plainjobs_jobrequest,
//     plainjobs_jobprocess and plainjobs_jobresult by default, the -table
//     names otherwise) together with unique_key, in any package; or
//   - it reads like SQL (or is a bare column reference such as "unique_key"
//     or "r.unique_key", as query builders take) and sits in a package with
//     legacy jobs: one that declares or sees a legacy job interface, or
//     declares a job type;
//
// and never when it is a struct tag, a Redis Lua script, JSON, or SQL on
// another system's own unique_key table (River's river_job). -all-sql
// widens the scope to every package and every table, River's included, as
// before this rule existed (tags, Lua and JSON stay out: they are not SQL).

// DefaultTables are plain-jobs' tables, the layout's tables when no -table
// is given.
var DefaultTables = []string{"plainjobs_jobrequest", "plainjobs_jobprocess", "plainjobs_jobresult"}

// foreignTable matches a table of another system that has a unique_key
// column of its own: River's tables (river_job and its neighbours).
var foreignTable = regexp.MustCompile(`(?i)(^|[^a-z0-9_])river_[a-z0-9_]*`)

// luaMarkers are what a Redis Lua script (asynq's, say) has and SQL never
// has.
var luaMarkers = []string{"redis.call(", "redis.pcall(", "keys[", "argv[", "redis.status_reply", "redis.error_reply"}

// nonSQL reports whether a string is text that is not SQL even when it
// names unique_key: a Lua script for Redis, or a JSON document.
func nonSQL(val string) bool {
	lower := strings.ToLower(val)
	for _, m := range luaMarkers {
		if strings.Contains(lower, m) {
			return true
		}
	}
	if t := strings.TrimSpace(val); len(t) > 1 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return true
	}
	return false
}

// tablePattern matches a table name as a whole identifier, bare, quoted,
// or schema-qualified ("public"."plainjobs_jobrequest").
func tablePattern(names []string) *regexp.Regexp {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(strings.ToLower(n))
	}
	return regexp.MustCompile(`(?i)(^|[^a-z0-9_$])(` + strings.Join(quoted, "|") + `)($|[^a-z0-9_$])`)
}

// addTable records a -table name: a table of the layout, optionally
// schema-qualified (the schema is not matched: SQL often leaves it to the
// search path).
func (s *settings) addTable(name string) error {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Trim(name, `"`)
	if name == "" || strings.ContainsAny(name, " \t\n,;()'`") {
		return fmt.Errorf("table %q: want a table name, e.g. plainjobs_jobrequest or jobs.jobs", name)
	}
	s.tables = append(s.tables, name)
	s.tableRE = tablePattern(s.tables)
	return nil
}

var defaultTableRE = tablePattern(DefaultTables)

// namesTable reports whether a string names one of the layout's tables.
func (s *settings) namesTable(val string) bool {
	if s.tableRE == nil {
		return defaultTableRE.MatchString(val)
	}
	return s.tableRE.MatchString(val)
}

// sqlInScope decides whether a string literal that names the unique_key
// column (not a tag) is reported: see the rule above.
func (p *pass) sqlInScope(val string) bool {
	if nonSQL(val) {
		return false
	}
	if p.s.namesTable(val) {
		return true
	}
	if !namesColumn(val) {
		return false
	}
	if p.s.allSQL {
		return true
	}
	return !foreignTable.MatchString(val) && p.hasLegacyJobs()
}

// hasLegacyJobs reports whether this package declares or sees a legacy job
// interface, or declares a job type: its SQL is the queue's.
func (p *pass) hasLegacyJobs() bool {
	return len(p.jobIfaces) > 0 || p.jobTypes > 0
}

// uniqueViolationInScope reports whether a unique violation handled around
// an enqueue in this package can come from the legacy unique rule of the
// queue, as the sql finding's scope decides: the package has legacy jobs
// (see hasLegacyJobs) or names one of the layout's tables, or -all-sql.
// Another queue's own unique index (neoq's fingerprint, say) is its own
// business.
func (p *pass) uniqueViolationInScope() bool {
	return p.s.allSQL || p.hasLegacyJobs() || p.namesQueueTable()
}

// namesQueueTable reports whether a string literal of the package names
// one of the layout's tables.
func (p *pass) namesQueueTable() bool {
	if p.queueTables == nil {
		found := false
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && !found {
					if val, err := strconv.Unquote(lit.Value); err == nil && p.s.namesTable(val) {
						found = true
					}
				}
				return !found
			})
		}
		p.queueTables = &found
	}
	return *p.queueTables
}
