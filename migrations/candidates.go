package migrations

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/migrate-unique/migrate-unique/layout"
)

type foundTable struct {
	schema, name string
	columns      []string
	// unique lists the definitions of the unique indexes that cover the
	// key, and predicates their WHERE clauses ("" for a full index).
	unique, predicates []string
}

// findCandidates lists the tables of the database that have a key column,
// grouped into layouts with the flags that select them, and completes the
// missing messages: where the layout's schema does not exist, with the
// schemas that hold such tables; otherwise with near misses (same name in
// another case or schema). An error means the tables could not be listed;
// missing is returned as is.
func findCandidates(ctx context.Context, q querier, l layout.Resolved, schemaExists bool, missing []string) ([]Candidate, []string, error) {
	rows, err := q.Query(ctx, `
SELECT n.nspname::text, c.relname::text,
       ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum),
       ARRAY(SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x WHERE x.indrelid = c.oid AND x.indisunique AND NOT x.indisprimary
             AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ('unique_key', 'concurrency_key') AND a.attnum = ANY (x.indkey::int2[]))
             ORDER BY x.indexrelid),
       ARRAY(SELECT coalesce(pg_get_expr(x.indpred, x.indrelid), '') FROM pg_index x WHERE x.indrelid = c.oid AND x.indisunique AND NOT x.indisprimary
             AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ('unique_key', 'concurrency_key') AND a.attnum = ANY (x.indkey::int2[]))
             ORDER BY x.indexrelid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ('unique_key', 'concurrency_key') AND NOT a.attisdropped)
ORDER BY 1, 2`)
	if err != nil {
		return nil, missing, err
	}
	var all []foundTable
	for rows.Next() {
		var t foundTable
		if err := rows.Scan(&t.schema, &t.name, &t.columns, &t.unique, &t.predicates); err != nil {
			rows.Close()
			return nil, missing, err
		}
		all = append(all, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, missing, err
	}

	if !schemaExists {
		// Every wanted table is missing for the one reason: say where
		// queue-shaped tables are instead of a near miss per table.
		var schemas []string
		for _, t := range all {
			if s := layout.Ident(t.schema); !slices.Contains(schemas, s) {
				schemas = append(schemas, s)
			}
		}
		if len(schemas) == 0 {
			missing = append(missing, "no schema of this database holds a queue-shaped table (one with a unique_key or concurrency_key column)")
		} else {
			missing = append(missing, fmt.Sprintf("the schemas holding queue-shaped tables (with a unique_key or concurrency_key column) are %s: pass one with --schema (names are case-sensitive)", strings.Join(schemas, ", ")))
		}
		return groupCandidates(all), missing, nil
	}
	// Near misses: a wanted table that exists under another case or schema.
	for _, want := range l.Tables() {
		var near []string
		for _, t := range all {
			if strings.EqualFold(t.name, want) && !(t.name == want && t.schema == l.Schema) {
				near = append(near, layout.Qualified(t.schema, t.name))
			}
		}
		switch {
		case len(near) == 1:
			missing = append(missing, fmt.Sprintf("%s matches %s: name it exactly (identifiers are case-sensitive and always quoted)", layout.Ident(want), near[0]))
		case len(near) > 1:
			missing = append(missing, fmt.Sprintf("%s matches %d candidates (%s): name one exactly with --schema and the table flag", layout.Ident(want), len(near), strings.Join(near, ", ")))
		}
	}
	return groupCandidates(all), missing, nil
}

// groupCandidates groups the tables with a key column into layouts, with
// the flags that select them.
func groupCandidates(all []foundTable) []Candidate {
	var out []Candidate
	bySchema := map[string][]foundTable{}
	var schemas []string
	for _, t := range all {
		if _, ok := bySchema[t.schema]; !ok {
			schemas = append(schemas, t.schema)
		}
		bySchema[t.schema] = append(bySchema[t.schema], t)
	}
	for _, s := range schemas {
		var req, proc, res, rest []foundTable
		for _, t := range bySchema[s] {
			n := strings.ToLower(t.name)
			switch {
			case strings.Contains(n, "request"):
				req = append(req, t)
			case strings.Contains(n, "process"):
				proc = append(proc, t)
			case strings.Contains(n, "result"):
				res = append(res, t)
			default:
				rest = append(rest, t)
			}
		}
		if len(req) == 1 {
			c := layout.Layout{Schema: s, ClassColumn: classColumn(req[0].columns), RequestsTable: req[0].name}
			if len(proc) == 1 {
				c.ProcessesTable = proc[0].name
				proc = nil
			}
			if len(res) == 1 {
				c.ResultsTable = res[0].name
				res = nil
			}
			out = append(out, candidate(c))
			req = nil
		}
		for _, t := range slices.Concat(req, proc, res, rest) {
			c := layout.Layout{Schema: s, ClassColumn: classColumn(t.columns)}
			if st := stateColumn(t.columns); st != "" {
				states, note := activeStates(st, t)
				c.JobsTable, c.StateColumn, c.ActiveStates = t.name, st, states
				if len(states) == 0 {
					c.ActiveStates = []string{"STATES"}
				}
				cand := candidate(c)
				cand.Args += "   (" + note + ")"
				out = append(out, cand)
				continue
			}
			c.RequestsTable = t.name
			out = append(out, candidate(c))
		}
	}
	return out
}

func candidate(l layout.Layout) Candidate {
	c := Candidate{Args: l.Args()}
	if c.Args == "" {
		c.Args = "(the default flags)"
	}
	for _, t := range l.Tables() {
		c.Tables = append(c.Tables, layout.Qualified(l.Schema, t))
	}
	return c
}

func classColumn(cols []string) string {
	for _, c := range []string{"job_class", "job_type", "kind", "class", "task_name", "type"} {
		if slices.Contains(cols, c) {
			return c
		}
	}
	return "job_class"
}

func stateColumn(cols []string) string {
	for _, c := range []string{"state", "status"} {
		if slices.Contains(cols, c) {
			return c
		}
	}
	return ""
}

// activeStates derives --active-states from the unique rule the cutover
// will drop, so that what counts as active is exactly what the old rule
// covered, and says where the states come from or why they cannot be
// derived.
func activeStates(stateCol string, t foundTable) ([]string, string) {
	switch len(t.unique) {
	case 0:
		return nil, "no unique rule covers the key: set --active-states to the states that count as active"
	case 1:
	default:
		return nil, fmt.Sprintf("%d unique rules cover the key (%s): set --active-states to the states the one that limits active jobs covered", len(t.unique), strings.Join(t.unique, "; "))
	}
	pred := t.predicates[0]
	if pred == "" {
		return nil, fmt.Sprintf("the unique rule %s covers every row, whatever its state: set --active-states to every state that is not finished", t.unique[0])
	}
	states, rest, ok := statesOf(pred, stateCol)
	switch {
	case !ok:
		return nil, fmt.Sprintf("the unique rule's predicate %s does not list the states it covers: set --active-states to them", pred)
	case len(rest) > 0:
		return states, fmt.Sprintf("the states the unique rule covered (WHERE %s); its other conditions (%s) are not part of what counts as active", pred, strings.Join(rest, " AND "))
	}
	return states, fmt.Sprintf("the states the unique rule covered: WHERE %s", pred)
}

var (
	// stateListRE matches pg_get_expr's rendering of "state IN (...)" and
	// "state = '...'" on a text, varchar or enum column.
	stateListRE = regexp.MustCompile(`^\(*"?(\w+)"?\)?(?:::[\w ]+)? = (?:ANY \(\(?ARRAY\[(.*)\]\)?(?:::[\w \[\]]+)?\)|('(?:[^']|'')*'(?:::[\w ]+)?))\)*$`)
	literalRE   = regexp.MustCompile(`'((?:[^']|'')*)'`)
)

// statesOf reads the states a predicate limits stateCol to. Conditions on
// the key column alone (IS NOT NULL, greater than the empty string) are what an empty key means
// anyway; any other condition is returned in rest. ok is false when the
// predicate does not list the states (OR, NOT IN, a comparison).
func statesOf(pred, stateCol string) (states, rest []string, ok bool) {
	if strings.Contains(pred, " OR ") {
		return nil, nil, false
	}
	p := strings.TrimSpace(pred)
	for strings.HasPrefix(p, "(") && strings.HasSuffix(p, ")") && balanced(p[1:len(p)-1]) {
		p = strings.TrimSpace(p[1 : len(p)-1])
	}
	for _, conj := range strings.Split(p, " AND ") {
		conj = strings.TrimSpace(conj)
		if m := stateListRE.FindStringSubmatch(conj); m != nil && m[1] == stateCol {
			list := m[2] + m[3]
			for _, lit := range literalRE.FindAllStringSubmatch(list, -1) {
				states = append(states, strings.ReplaceAll(lit[1], "''", "'"))
			}
			continue
		}
		if !strings.Contains(conj, stateCol) && (strings.Contains(conj, layout.LegacyKeyColumn) || strings.Contains(conj, layout.KeyColumn)) {
			continue
		}
		rest = append(rest, conj)
	}
	return states, rest, len(states) > 0
}

// balanced reports whether s's parentheses pair up.
func balanced(s string) bool {
	depth := 0
	for _, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}
