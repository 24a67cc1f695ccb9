package compat

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// column is what the runtime needs to know of one column.
type column struct {
	typ        string // format_type, e.g. character varying(255), of a domain's base type; schema.name for a type outside pg_catalog
	notNull    bool
	hasDefault bool
	maxLen     int    // varchar/char length limit in characters; 0: none
	collation  string // the column's ordering: provider:locale (libc:C.UTF-8, icu:en-US), the database's for "default"
	cIndex     bool   // a valid index orders (class, this column COLLATE "C") on the table
}

// table is one table of the layout as the catalog describes it.
type table struct {
	name string
	cols map[string]column
}

func (t *table) has(col string) bool {
	if t == nil {
		return false
	}
	_, ok := t.cols[col]
	return ok
}

// keyColumn is the table's key column: concurrency_key after the migration,
// unique_key before it.
func (t *table) keyColumn() string {
	if t.has(layout.KeyColumn) {
		return layout.KeyColumn
	}
	if t.has(layout.LegacyKeyColumn) {
		return layout.LegacyKeyColumn
	}
	return ""
}

// schema is the catalog's view of a layout, read once per Client and again
// when a statement finds it stale (the migration ran under a live runtime).
type schema struct {
	l         layout.Resolved
	requests  *table // the table new jobs go to (the jobs table when single-table)
	processes *table // nil for single-table layouts and when absent
	results   *table // nil when the layout has none
	keyCol    string
	// migrated is true when the key column is concurrency_key.
	migrated bool
	// hasLimits is true when the concurrency_limits table exists.
	hasLimits bool
	// bytewise is true when the key column sorts bytewise (libc C or
	// POSIX, C.UTF-8, builtin C), so a prefix is a range of the counting
	// index; otherwise the prefix compares with COLLATE "C", a range of the
	// prefix index (class, key COLLATE "C") the migration builds.
	bytewise bool
	// deterministic is false for a nondeterministic key collation, whose
	// equality is not byte equality.
	deterministic bool
	// keyType is the key column's type, schema-qualified, when it lives
	// outside pg_catalog (an extension's, such as citext), and keySchema
	// that schema, where its comparison operators are: the count compares
	// with them, as the old unique index did. "" for pg_catalog's types.
	keyType, keySchema string
	// looseKey says the key's equality is not byte equality (a type such
	// as citext, a nondeterministic collation): keys the advisory lock
	// tells apart count as one group. Such a group's admission also takes
	// its class's lock exclusively (see planLocks), so that concurrent
	// enqueues of ACCT-7 and acct-7 wait for each other.
	looseKey bool
	// rule is the unique rule on the key that still stands on the table new
	// jobs go to (legacy and expanded layouts; a layout that down is
	// rolling back once it rebuilt the rule), nil when there is none.
	rule *uniqueRule

	texts  sync.Map // statement shape -> stmtText
	fields sync.Map // table name -> []rowField
	// guards are the guarded lock statements' texts (guarded).
	guardsMu sync.RWMutex
	guards   map[guardKey]stmtText
}

// uniqueRule is a unique index whose key is (class, key): plain-jobs 0.37's
// partial unique index, a team's unique constraint. While it stands it
// refuses a second row of a key it covers whatever the job's limit; the
// admission then inserts with ON CONFLICT DO NOTHING and reports the job it
// refused as a Skip with Reason SkipUniqueRule.
type uniqueRule struct {
	name string
	// valid is false while the index is being built (down rebuilds it
	// CONCURRENTLY): it already refuses duplicates, but ON CONFLICT cannot
	// name it as its arbiter yet. It is false too for a predicate
	// internal/qualify cannot render on any search_path.
	valid bool
	// cols are its key columns in index order; pred its predicate as the
	// catalog renders it ("" for none).
	cols [2]string
	pred string
}

// onConflict is the clause of the insert of new jobs while the rule
// stands: the rule (columns and predicate) as the arbiter, so that only
// the rule's refusal becomes a skip and any other unique violation stays an
// error; any unique index while the rule is not valid yet.
func (r *uniqueRule) onConflict() string {
	if r == nil {
		return ""
	}
	if !r.valid {
		return "\n    ON CONFLICT DO NOTHING"
	}
	c := "\n    ON CONFLICT (" + layout.Ident(r.cols[0]) + ", " + layout.Ident(r.cols[1]) + ")"
	if r.pred != "" {
		c += " WHERE " + r.pred
	}
	return c + " DO NOTHING"
}

// ruleQuery finds the unique indexes, ready to refuse duplicates, whose key
// is exactly (class column, key column) on the table new jobs go to, the
// valid ones first. pg_get_expr renders the predicate for the session's
// search_path, which is the one the admission's statements run under;
// an operator that search_path would not find is rendered qualified.
const ruleQuery = `SELECT ic.relname::pg_catalog.text, i.indisvalid,
       a0.attname::pg_catalog.text, a1.attname::pg_catalog.text,
       COALESCE(pg_catalog.pg_get_expr(i.indpred, i.indrelid), '')
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.indrelid
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) t.relnamespace
JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
JOIN pg_catalog.pg_attribute a0 ON a0.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a0.attnum OPERATOR(pg_catalog.=) i.indkey[0]
JOIN pg_catalog.pg_attribute a1 ON a1.attrelid OPERATOR(pg_catalog.=) i.indrelid AND a1.attnum OPERATOR(pg_catalog.=) i.indkey[1]
WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND t.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text
  AND i.indisunique AND i.indisready AND i.indnkeyatts OPERATOR(pg_catalog.=) 2 AND i.indexprs IS NULL
  AND ARRAY[a0.attname, a1.attname]::pg_catalog.text[] OPERATOR(pg_catalog.@>) ARRAY[$3::pg_catalog.text, $4::pg_catalog.text]
ORDER BY i.indisvalid DESC, ic.relname`

// readRule reads the unique rule on s's key, if one stands.
func (s *schema) readRule(ctx context.Context, db Executor) error {
	rows, err := db.Query(ctx, qualify.Must(ruleQuery), s.l.Schema, s.requests.name, s.l.ClassColumn, s.keyCol)
	if err != nil {
		return fmt.Errorf("compat: read the unique rule of %s: %w", s.l.Table(s.requests.name), err)
	}
	defer rows.Close()
	for rows.Next() {
		var r uniqueRule
		if err := rows.Scan(&r.name, &r.valid, &r.cols[0], &r.cols[1], &r.pred); err != nil {
			return fmt.Errorf("compat: read the unique rule: %w", err)
		}
		if _, err := qualify.SQL("SELECT WHERE " + r.pred); r.pred != "" && err != nil {
			// A predicate the admission's text could not be qualified
			// with (NULLIF, IS DISTINCT FROM, ...): any unique index is
			// the arbiter, as while the rule is not valid.
			r.valid, r.pred = false, ""
		}
		if s.rule == nil {
			s.rule = &r
		}
	}
	return rows.Err()
}

// catalogQuery reads the layout's columns. The collation column says how
// the column really orders (layout.CollationSQL); the last column whether a
// valid index on the table leads with (class, column COLLATE "C").
var catalogQuery = `SELECT c.relname, a.attname,
       CASE WHEN ty.typnamespace = 11 THEN format_type(ty.oid, CASE WHEN ty.oid = a.atttypid THEN a.atttypmod ELSE -1 END)
            ELSE quote_ident(tn.nspname) || '.' || quote_ident(ty.typname) END,
       a.attnotnull, a.atthasdef,
       CASE WHEN a.atttypid = ANY ('{1043,1042}'::oid[]) AND a.atttypmod > 4 THEN a.atttypmod - 4 ELSE 0 END,
       coalesce(` + layout.CollationSQL("a.attcollation") + `, ''),
       EXISTS (SELECT FROM pg_index i
               WHERE i.indrelid = c.oid AND i.indisvalid AND i.indnatts >= 2 AND i.indcollation[1] = ANY ('{950,951}'::oid[])
                 AND i.indkey[1] = a.attnum AND i.indkey[0] = (SELECT ca.attnum FROM pg_attribute ca WHERE ca.attrelid = c.oid AND ca.attname = $6))
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type ty0 ON ty0.oid = a.atttypid
JOIN pg_type ty ON ty.oid = CASE WHEN ty0.typbasetype = 0 THEN ty0.oid ELSE ty0.typbasetype END
JOIN pg_namespace tn ON tn.oid = ty.typnamespace
WHERE n.nspname = $1::text AND c.relkind = ANY ('{r,p}'::"char"[]) AND c.relname = ANY (ARRAY[$2::text, $3::text, $4::text, $5::text])`

// inspect reads the layout's tables from the catalog and checks that the
// runtime can work on them.
func inspect(ctx context.Context, db Executor, l layout.Resolved) (*schema, error) {
	names := []string{l.RequestsTable, l.ProcessesTable, l.ResultsTable, layout.LimitsTable}
	if l.SingleTable() {
		names = []string{l.JobsTable, "", "", layout.LimitsTable}
	}
	rows, err := db.Query(ctx, qualify.Must(catalogQuery), l.Schema, names[0], names[1], names[2], names[3], l.ClassColumn)
	if err != nil {
		return nil, fmt.Errorf("compat: read the catalog for schema %s: %w", layout.Ident(l.Schema), err)
	}
	tables := map[string]*table{}
	for rows.Next() {
		var rel, name, typ, coll string
		var c column
		var maxLen int32
		if err := rows.Scan(&rel, &name, &typ, &c.notNull, &c.hasDefault, &maxLen, &coll, &c.cIndex); err != nil {
			rows.Close()
			return nil, fmt.Errorf("compat: read the catalog: %w", err)
		}
		c.typ, c.maxLen, c.collation = typ, int(maxLen), coll
		t := tables[rel]
		if t == nil {
			t = &table{name: rel, cols: map[string]column{}}
			tables[rel] = t
		}
		t.cols[name] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("compat: read the catalog: %w", err)
	}

	s := &schema{l: l, hasLimits: tables[layout.LimitsTable] != nil}
	need := func(name, field string) (*table, error) {
		t := tables[name]
		if t == nil {
			return nil, fmt.Errorf("%w: table %s not found; check layout.Layout.%s and Schema", ErrSchema, l.Table(name), field)
		}
		if !t.has(l.ClassColumn) {
			return nil, fmt.Errorf("%w: table %s has no class column %s; set layout.Layout.ClassColumn", ErrSchema, l.Table(name), layout.Ident(l.ClassColumn))
		}
		key := t.keyColumn()
		if key == "" {
			return nil, fmt.Errorf("%w: table %s has neither %s nor %s; it is not a unique-key queue table", ErrSchema, l.Table(name), layout.KeyColumn, layout.LegacyKeyColumn)
		}
		if s.keyCol != "" && key != s.keyCol {
			return nil, fmt.Errorf("%w: table %s has %s while another table of the layout has %s; the migration is half done, run `migrate-unique up` to finish it", ErrSchema, l.Table(name), key, s.keyCol)
		}
		s.keyCol = key
		id := "id"
		if l.SingleTable() {
			id = l.IDColumn
		}
		if c, ok := t.cols[id]; !ok || !isInteger(c.typ) {
			return nil, fmt.Errorf("%w: table %s needs an integer id column %s", ErrSchema, l.Table(name), layout.Ident(id))
		}
		return t, nil
	}
	if l.SingleTable() {
		if s.requests, err = need(l.JobsTable, "JobsTable"); err != nil {
			return nil, err
		}
		if !s.requests.has(l.StateColumn) {
			return nil, fmt.Errorf("%w: table %s has no state column %s; set layout.Layout.StateColumn", ErrSchema, l.Table(l.JobsTable), layout.Ident(l.StateColumn))
		}
		s.results = s.requests
	} else {
		if s.requests, err = need(l.RequestsTable, "RequestsTable"); err != nil {
			return nil, err
		}
		if l.ProcessesTable != "" {
			if s.processes, err = need(l.ProcessesTable, "ProcessesTable"); err != nil {
				return nil, err
			}
		}
		if l.ResultsTable != "" {
			if s.results, err = need(l.ResultsTable, "ResultsTable"); err != nil {
				return nil, err
			}
		}
	}
	s.migrated = s.keyCol == layout.KeyColumn
	if err := s.readRule(ctx, db); err != nil {
		return nil, err
	}
	s.bytewise, s.deterministic = layout.Ordering(s.requests.cols[s.keyCol].collation)
	if typ := s.requests.cols[s.keyCol].typ; strings.Contains(typ, ".") && !strings.Contains(typ, "(") {
		s.keyType, s.keySchema = typ, typeSchema(typ)
	}
	s.looseKey = !s.deterministic || s.keyType != ""
	return s, nil
}

// typeSchema is the schema part of a type name rendered as
// quote_ident(schema) || '.' || quote_ident(name).
func typeSchema(typ string) string {
	quoted := false
	for i := 0; i < len(typ); i++ {
		switch {
		case typ[i] == '"':
			quoted = !quoted
		case typ[i] == '.' && !quoted:
			return typ[:i]
		}
	}
	return ""
}

// keyRange renders the keyed count's condition on key (the column,
// quoted) for the parameter or expression k: a closed range, so that the
// counting index returns the group's rows in its order (see admitText). It
// compares with the column's own equality, which is the old unique rule's:
// an extension type's operators (named with its schema, k cast to the
// type), or pg_catalog's in the column's collation.
func (s *schema) keyRange(key, k string) string {
	if s.keyType != "" {
		ge, le := "OPERATOR("+s.keySchema+".>=)", "OPERATOR("+s.keySchema+".<=)"
		k += "::" + s.keyType
		return " AND " + key + " " + ge + " " + k + " AND " + key + " " + le + " " + k
	}
	return " AND " + key + " >= " + k + " AND " + key + " <= " + k
}

// prefixIndexed reports whether every active table has the prefix index
// (class, key COLLATE "C") that a no-overlap count needs when the key
// column does not sort bytewise.
func (s *schema) prefixIndexed() bool {
	for _, t := range s.activeTables() {
		if !t.cols[s.keyCol].cIndex {
			return false
		}
	}
	return true
}

func isInteger(typ string) bool {
	return typ == "bigint" || typ == "integer" || typ == "smallint"
}

// keyMaxLen is the key column's length limit in characters (0: none).
func (s *schema) keyMaxLen() int {
	max := 0
	for _, t := range []*table{s.requests, s.processes, s.results} {
		if t == nil {
			continue
		}
		if n := t.cols[s.keyCol].maxLen; n > 0 && (max == 0 || n < max) {
			max = n
		}
	}
	return max
}

// activeTables returns the tables whose rows count as active.
func (s *schema) activeTables() []*table {
	if s.processes == nil {
		return []*table{s.requests}
	}
	return []*table{s.requests, s.processes}
}

// idColumn is the id column of the layout's tables.
func (s *schema) idColumn() string {
	if s.l.SingleTable() {
		return s.l.IDColumn
	}
	return "id"
}
