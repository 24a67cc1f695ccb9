package migrations

import "testing"

// renameKeyInIndexDef renames the key column wherever the definition uses
// it as a column, and nowhere else.
func TestRenameKeyInIndexDef(t *testing.T) {
	for _, c := range []struct{ def, want string }{
		{`CREATE UNIQUE INDEX plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, unique_key) WHERE ((retry_attempt = 0) AND ((unique_key)::text > ''::text))`,
			`plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, concurrency_key) WHERE ((retry_attempt = 0) AND ((concurrency_key)::text > ''::text))`},
		// The name, the schema and the table keep unique_key; a quoted
		// column is renamed (the new name needs no quotes).
		{`CREATE UNIQUE INDEX unique_key ON unique_key.unique_key USING btree ("unique_key")`,
			`unique_key ON unique_key.unique_key USING btree (concurrency_key)`},
		{`CREATE UNIQUE INDEX "a USING b" ON "My Schema"."unique_key" USING btree (kind, unique_key DESC NULLS LAST)`,
			`"a USING b" ON "My Schema"."unique_key" USING btree (kind, concurrency_key DESC NULLS LAST)`},
		// String literals, other quoted names, qualified names, types and
		// the tablespace are left alone.
		{`CREATE UNIQUE INDEX i ON public.t USING btree (unique_key) INCLUDE (x) WITH (fillfactor='90') TABLESPACE unique_key WHERE ((note <> 'unique_key'::text) AND (("unique_key ")::text <> 'it''s unique_key'::text) AND (t.unique_key IS NOT NULL) AND (x::unique_key IS NULL))`,
			`i ON public.t USING btree (concurrency_key) INCLUDE (x) WITH (fillfactor='90') TABLESPACE unique_key WHERE ((note <> 'unique_key'::text) AND (("unique_key ")::text <> 'it''s unique_key'::text) AND (t.unique_key IS NOT NULL) AND (x::unique_key IS NULL))`},
		{`CREATE UNIQUE INDEX i ON public.t USING btree (lower((unique_key)::text)) NULLS NOT DISTINCT`,
			`i ON public.t USING btree (lower((concurrency_key)::text)) NULLS NOT DISTINCT`},
		// Already renamed: nothing to do.
		{`CREATE UNIQUE INDEX i ON public.t USING btree (concurrency_key)`, `i ON public.t USING btree (concurrency_key)`},
	} {
		got, err := renameKeyInIndexDef(c.def)
		if err != nil {
			t.Errorf("%s: %v", c.def, err)
			continue
		}
		if got != c.want {
			t.Errorf("renameKeyInIndexDef(%s)\n got %s\nwant %s", c.def, got, c.want)
		}
	}
	for _, bad := range []string{`CREATE INDEX i ON public.t USING btree (unique_key)`, `CREATE UNIQUE INDEX i ON public.t (unique_key)`} {
		if got, err := renameKeyInIndexDef(bad); err == nil {
			t.Errorf("renameKeyInIndexDef(%s) = %s, want an error", bad, got)
		}
	}
}
