package testdb_test

import (
	"context"
	"slices"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestLegacySchemasHaveTheFieldShape pins the catalog shape of each legacy
// schema, which the migration and the runtime rely on.
func TestLegacySchemasHaveTheFieldShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		schema legacy.Schema
		// unique is the definition of the object that enforces the key.
		unique []string
		// indexes lists every index definition on the layout's tables.
		indexes []string
		counts  map[string]int
		// facts are what the seed must contain, each a boolean query. A
		// template database outlives a test run: the future must still be
		// the future in a copy made long after the seed.
		facts []string
	}{
		{
			schema: legacy.PlainJobs,
			unique: []string{"CREATE UNIQUE INDEX plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, unique_key) WHERE ((retry_attempt = 0) AND ((unique_key)::text > ''::text))"},
			// plain-jobs 0.37.6 as its migrations 0001-0006 leave it (see
			// plainjobs.sql): no key index on results, the primary key of
			// the processes table named after the table it was created as.
			indexes: []string{
				"CREATE INDEX job_class_unique_key ON public.plainjobs_jobprocess USING btree (job_class, unique_key)",
				"CREATE INDEX job_request_class_unique_key ON public.plainjobs_jobrequest USING btree (job_class, unique_key)",
				"CREATE INDEX plainjobs_j_created_04fbb8_idx ON public.plainjobs_jobprocess USING btree (created_at)",
				"CREATE INDEX plainjobs_j_created_1eeb20_idx ON public.plainjobs_jobrequest USING btree (created_at)",
				"CREATE INDEX plainjobs_j_created_7978bf_idx ON public.plainjobs_jobresult USING btree (created_at)",
				"CREATE INDEX plainjobs_j_ended_a_648f25_idx ON public.plainjobs_jobresult USING btree (ended_at)",
				"CREATE INDEX plainjobs_j_job_cla_19f3c1_idx ON public.plainjobs_jobprocess USING btree (job_class)",
				"CREATE INDEX plainjobs_j_job_cla_8791b4_idx ON public.plainjobs_jobresult USING btree (job_class)",
				"CREATE INDEX plainjobs_j_job_cla_a18abf_idx ON public.plainjobs_jobrequest USING btree (job_class)",
				"CREATE INDEX plainjobs_j_job_pro_751a64_idx ON public.plainjobs_jobresult USING btree (job_process_uuid)",
				"CREATE INDEX plainjobs_j_job_req_32b6eb_idx ON public.plainjobs_jobprocess USING btree (job_request_uuid)",
				"CREATE INDEX plainjobs_j_job_req_3ddecf_idx ON public.plainjobs_jobresult USING btree (job_request_uuid)",
				"CREATE INDEX plainjobs_j_priorit_fd4fac_idx ON public.plainjobs_jobrequest USING btree (priority)",
				"CREATE INDEX plainjobs_j_queue_0a2178_idx ON public.plainjobs_jobresult USING btree (queue)",
				"CREATE INDEX plainjobs_j_queue_b34b5a_idx ON public.plainjobs_jobrequest USING btree (queue)",
				"CREATE INDEX plainjobs_j_queue_d07d21_idx ON public.plainjobs_jobprocess USING btree (queue)",
				"CREATE INDEX plainjobs_j_start_a_f3b8da_idx ON public.plainjobs_jobrequest USING btree (start_at)",
				"CREATE INDEX plainjobs_j_started_5cd62a_idx ON public.plainjobs_jobprocess USING btree (started_at)",
				"CREATE INDEX plainjobs_j_started_6fb2ce_idx ON public.plainjobs_jobresult USING btree (started_at)",
				"CREATE INDEX plainjobs_j_status_1ef683_idx ON public.plainjobs_jobresult USING btree (status)",
				"CREATE INDEX plainjobs_j_trace_i_02f370_idx ON public.plainjobs_jobresult USING btree (trace_id)",
				"CREATE INDEX plainjobs_j_trace_i_194003_idx ON public.plainjobs_jobrequest USING btree (trace_id)",
				"CREATE INDEX plainjobs_j_trace_i_9f93c8_idx ON public.plainjobs_jobprocess USING btree (trace_id)",
				"CREATE INDEX plainjobs_j_unique__42f6a6_idx ON public.plainjobs_jobrequest USING btree (unique_key)",
				"CREATE INDEX plainjobs_j_unique__67172c_idx ON public.plainjobs_jobprocess USING btree (unique_key)",
				"CREATE UNIQUE INDEX plainjobs_job_pkey ON public.plainjobs_jobprocess USING btree (id)",
				"CREATE UNIQUE INDEX plainjobs_job_unique_uuid ON public.plainjobs_jobprocess USING btree (uuid)",
				"CREATE UNIQUE INDEX plainjobs_jobrequest_pkey ON public.plainjobs_jobrequest USING btree (id)",
				"CREATE UNIQUE INDEX plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, unique_key) WHERE ((retry_attempt = 0) AND ((unique_key)::text > ''::text))",
				"CREATE UNIQUE INDEX plainjobs_jobrequest_unique_uuid ON public.plainjobs_jobrequest USING btree (uuid)",
				"CREATE UNIQUE INDEX plainjobs_jobresult_pkey ON public.plainjobs_jobresult USING btree (id)",
				"CREATE UNIQUE INDEX plainjobs_jobresult_unique_uuid ON public.plainjobs_jobresult USING btree (uuid)",
			},
			counts: map[string]int{"plainjobs_jobrequest": 1000, "plainjobs_jobprocess": 100, "plainjobs_jobresult": 200},
			facts: []string{
				`SELECT EXISTS (SELECT 1 FROM plainjobs_jobrequest WHERE unique_key > '') AND EXISTS (SELECT 1 FROM plainjobs_jobrequest WHERE unique_key = '')`,
				// retries share their original's key
				`SELECT EXISTS (SELECT 1 FROM plainjobs_jobrequest r JOIN plainjobs_jobrequest o ON o.job_class = r.job_class AND o.unique_key = r.unique_key
				 WHERE r.retry_attempt > 0 AND o.retry_attempt = 0 AND r.unique_key > '')`,
				`SELECT EXISTS (SELECT 1 FROM plainjobs_jobrequest WHERE start_at > now() + interval '1 month')`,
				`SELECT EXISTS (SELECT 1 FROM plainjobs_jobprocess WHERE unique_key > '' AND started_at IS NOT NULL)`,
				`SELECT count(DISTINCT status) = 4 FROM plainjobs_jobresult`,
				// plain-jobs' migrations create no column default, and
				// leave ended_at NULL-able and error NOT NULL
				`SELECT NOT EXISTS (SELECT 1 FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid WHERE c.relname LIKE 'plainjobs\_%')`,
				`SELECT NOT attnotnull FROM pg_attribute WHERE attrelid = 'plainjobs_jobresult'::regclass AND attname = 'ended_at'`,
				`SELECT attnotnull FROM pg_attribute WHERE attrelid = 'plainjobs_jobresult'::regclass AND attname = 'error'`,
			},
		},
		{
			schema: legacy.TeamQueue,
			unique: []string{`CONSTRAINT "JobRequests_Kind_UniqueKey_uniq" UNIQUE (kind, unique_key)`},
			indexes: []string{
				`CREATE INDEX "JobRequests_start_at_idx" ON "Billing Queue"."JobRequests" USING btree (start_at)`,
				`CREATE UNIQUE INDEX "JobRequests_Kind_UniqueKey_uniq" ON "Billing Queue"."JobRequests" USING btree (kind, unique_key)`,
				`CREATE UNIQUE INDEX "JobRequests_pkey" ON "Billing Queue"."JobRequests" USING btree (id)`,
				`CREATE UNIQUE INDEX "JobRequests_uuid_key" ON "Billing Queue"."JobRequests" USING btree (uuid)`,
				`CREATE UNIQUE INDEX job_processes_pkey ON "Billing Queue".job_processes USING btree (id)`,
			},
			counts: map[string]int{"JobRequests": 1000, "job_processes": 100},
			facts: []string{
				`SELECT EXISTS (SELECT 1 FROM "Billing Queue"."JobRequests" WHERE unique_key IS NULL) AND EXISTS (SELECT 1 FROM "Billing Queue"."JobRequests" WHERE unique_key IS NOT NULL)`,
				`SELECT EXISTS (SELECT 1 FROM "Billing Queue"."JobRequests" WHERE retry_attempt > 0)`,
				`SELECT EXISTS (SELECT 1 FROM "Billing Queue"."JobRequests" WHERE start_at > now() + interval '1 month')`,
				`SELECT EXISTS (SELECT 1 FROM "Billing Queue".job_processes WHERE unique_key IS NOT NULL)`,
			},
		},
		{
			schema: legacy.SingleTable,
			unique: []string{"CREATE UNIQUE INDEX jobs_active_unique_key ON public.jobs USING btree (job_type, unique_key) WHERE (status = ANY (ARRAY['pending'::text, 'running'::text, 'paused'::text]))"},
			indexes: []string{
				"CREATE INDEX jobs_status_run_at_idx ON public.jobs USING btree (status, run_at)",
				"CREATE UNIQUE INDEX jobs_active_unique_key ON public.jobs USING btree (job_type, unique_key) WHERE (status = ANY (ARRAY['pending'::text, 'running'::text, 'paused'::text]))",
				"CREATE UNIQUE INDEX jobs_pkey ON public.jobs USING btree (id)",
			},
			counts: map[string]int{"jobs": 1000},
			facts: []string{
				`SELECT EXISTS (SELECT 1 FROM jobs WHERE unique_key IS NULL) AND EXISTS (SELECT 1 FROM jobs WHERE unique_key IS NOT NULL)`,
				// finished rows repeat the keys of active ones
				`SELECT EXISTS (SELECT 1 FROM jobs f JOIN jobs a ON a.job_type = f.job_type AND a.unique_key = f.unique_key
				 WHERE f.status IN ('done', 'failed', 'cancelled') AND a.status IN ('pending', 'running', 'paused'))`,
				`SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'pending' AND run_at > now() + interval '1 month') AND EXISTS (SELECT 1 FROM jobs WHERE status = 'running' AND lease_until > now() + interval '1 month')`,
				`SELECT count(DISTINCT status) = 6 FROM jobs`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.schema.Name, func(t *testing.T) {
			t.Parallel()
			url := testdb.New(t, testdb.FromTemplate(tt.schema.Key(1000), func(ctx context.Context, url string) error {
				return tt.schema.LoadURL(ctx, url, 1000)
			}))
			conn := testdb.Connect(t, url)
			ctx := t.Context()
			l := tt.schema.Resolved

			var unique []string
			rows, err := conn.Query(ctx, `
				SELECT CASE WHEN c.oid IS NULL THEN pg_get_indexdef(i.indexrelid)
				            ELSE 'CONSTRAINT ' || quote_ident(c.conname) || ' ' || pg_get_constraintdef(c.oid) END
				FROM pg_index i
				JOIN pg_class t ON t.oid = i.indrelid
				JOIN pg_namespace n ON n.oid = t.relnamespace
				JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = ANY (i.indkey) AND a.attname = 'unique_key'
				LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.contype = 'u'
				WHERE n.nspname = $1 AND i.indisunique ORDER BY 1`, l.Schema)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var def string
				if err := rows.Scan(&def); err != nil {
					t.Fatal(err)
				}
				unique = append(unique, def)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(unique, tt.unique) {
				t.Errorf("unique objects on the key:\n got %q\nwant %q", unique, tt.unique)
			}

			var indexes []string
			rows, err = conn.Query(ctx, `SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
				JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
				WHERE n.nspname = $1 AND t.relname = ANY ($2)
				ORDER BY 1`, l.Schema, l.Tables())
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var def string
				if err := rows.Scan(&def); err != nil {
					t.Fatal(err)
				}
				indexes = append(indexes, def)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(indexes, tt.indexes) {
				t.Errorf("indexes:\n got %q\nwant %q", indexes, tt.indexes)
			}

			for table, want := range tt.counts {
				var n int
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+l.Table(table)).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != want {
					t.Errorf("%s has %d rows, want %d", table, n, want)
				}
			}
			for _, fact := range tt.facts {
				var ok bool
				if err := conn.QueryRow(ctx, fact).Scan(&ok); err != nil {
					t.Fatalf("%s: %v", fact, err)
				}
				if !ok {
					t.Errorf("the seed lacks what this checks: %s", fact)
				}
			}
		})
	}
}
