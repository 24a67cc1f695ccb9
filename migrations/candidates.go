package migrations

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-unique/migrate-unique/layout"
)

type foundTable struct {
	schema, name string
	columns      []string
}

// findCandidates lists the tables of the database that have a key column,
// grouped into layouts with the flags that select them, and completes the
// missing messages with near misses (same name in another case or schema).
// An error means the tables could not be listed; missing is returned as is.
func findCandidates(ctx context.Context, q querier, l layout.Resolved, missing []string) ([]Candidate, []string, error) {
	rows, err := q.Query(ctx, `
SELECT n.nspname::text, c.relname::text,
       ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum)
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
		if err := rows.Scan(&t.schema, &t.name, &t.columns); err != nil {
			rows.Close()
			return nil, missing, err
		}
		all = append(all, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, missing, err
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
				c.JobsTable, c.StateColumn, c.ActiveStates = t.name, st, []string{"pending", "running"}
				cand := candidate(c)
				cand.Args += "   (set --active-states to the states that count as active)"
				out = append(out, cand)
				continue
			}
			c.RequestsTable = t.name
			out = append(out, candidate(c))
		}
	}
	return out, missing, nil
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
