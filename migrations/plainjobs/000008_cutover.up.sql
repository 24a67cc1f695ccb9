-- The cutover, in one short transaction: rename the key column on every table
-- of the layout and drop the unique constraint or unique index that covers
-- the key, whatever its name or predicate, saving its exact definition.
SET LOCAL search_path = pg_catalog, pg_temp;
DO $migrate_unique$
DECLARE
    t pg_catalog.regclass;
    r record;
    found pg_catalog.jsonb;
    dropped pg_catalog.jsonb := '[]';
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM set_config('lock_timeout', '2000ms', true);
    LOCK TABLE "public"."plainjobs_jobrequest", "public"."plainjobs_jobprocess", "public"."plainjobs_jobresult" IN ACCESS EXCLUSIVE MODE;
    FOREACH t IN ARRAY ARRAY['"public"."plainjobs_jobrequest"', '"public"."plainjobs_jobprocess"', '"public"."plainjobs_jobresult"']::regclass[] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attnum > 0 AND NOT attisdropped
                       AND attname IN ('unique_key', 'concurrency_key')) THEN
            RAISE EXCEPTION 'table % has neither a % nor a % column', t, 'unique_key', 'concurrency_key';
        END IF;
        found := '[]';
        FOR r IN
            SELECT x.indexrelid, pg_get_indexdef(x.indexrelid) AS def, c.conname, pg_get_constraintdef(c.oid) AS condef,
                   coalesce(c.condeferrable, false) AS deferrable, coalesce(c.condeferred, false) AS deferred
            FROM pg_index x
            LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid AND c.conrelid = x.indrelid AND c.contype = 'u'
            WHERE x.indrelid = t AND x.indisunique AND NOT x.indisprimary
              AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = t AND a.attname IN ('unique_key', 'concurrency_key')
                          AND NOT a.attisdropped AND a.attnum = ANY (x.indkey::int2[]))
            ORDER BY x.indexrelid
        LOOP
            found := found || jsonb_build_object('oid', r.indexrelid::oid::bigint, 'definition', r.def, 'constraint', r.conname,
                'constraint_definition', r.condef, 'deferrable', r.deferrable, 'deferred', r.deferred,
                -- On a partitioned table, each partition's own index, so that down rebuilds each exactly.
                'partitions', coalesce((SELECT jsonb_agg(jsonb_build_object('oid', pi.inhrelid::bigint, 'table', px.indrelid::regclass::text,
                                                                            'index', pc.relname, 'definition', pg_get_indexdef(pi.inhrelid)) ORDER BY pc.relname)
                                        FROM pg_inherits pi JOIN pg_index px ON px.indexrelid = pi.inhrelid JOIN pg_class pc ON pc.oid = pi.inhrelid
                                        WHERE pi.inhparent = r.indexrelid), '[]'));
        END LOOP;
        IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = 'unique_key' AND NOT attisdropped) THEN
            EXECUTE format('ALTER TABLE %s RENAME COLUMN %I TO %I', t, 'unique_key', 'concurrency_key');
        END IF;
        FOR r IN
            SELECT f.e, i.relname AS index_name, x.indexrelid, pg_get_indexdef(x.indexrelid) AS rebuild,
                   pg_get_expr(x.indpred, x.indrelid) AS predicate,
                   to_jsonb(ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, true) FROM generate_series(1, x.indnkeyatts) AS k)) AS columns
            FROM jsonb_array_elements(found) AS f(e)
            JOIN pg_index x ON x.indexrelid = (f.e->>'oid')::bigint::oid
            JOIN pg_class i ON i.oid = x.indexrelid
        LOOP
            dropped := dropped || ((r.e - 'oid') || jsonb_build_object('table', t::text, 'index', r.index_name, 'rebuild', r.rebuild,
                'predicate', r.predicate, 'columns', r.columns,
                'partitions', coalesce((SELECT jsonb_agg((p.e - 'oid') || jsonb_build_object('rebuild', pg_get_indexdef((p.e->>'oid')::bigint::oid)))
                                        FROM jsonb_array_elements(r.e->'partitions') AS p(e)), '[]')));
            IF r.e->>'constraint' IS NOT NULL THEN
                EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', t, r.e->>'constraint');
            ELSE
                EXECUTE format('DROP INDEX %s', r.indexrelid::regclass);
            END IF;
        END LOOP;
    END LOOP;
    -- plain-jobs 0007's name for the index (the same index once the key column is renamed).
    IF to_regclass('"public"."plainjobs_j_unique__67172c_idx"') IS NOT NULL AND to_regclass('"public"."plainjobs_j_concurr_ad4464_idx"') IS NULL THEN
        ALTER INDEX "public"."plainjobs_j_unique__67172c_idx" RENAME TO "plainjobs_j_concurr_ad4464_idx";
    END IF;
    -- plain-jobs 0007's name for the index (the same index once the key column is renamed).
    IF to_regclass('"public"."job_class_unique_key"') IS NOT NULL AND to_regclass('"public"."job_concurrency_key"') IS NULL THEN
        ALTER INDEX "public"."job_class_unique_key" RENAME TO "job_concurrency_key";
    END IF;
    -- plain-jobs 0007's name for the index (the same index once the key column is renamed).
    IF to_regclass('"public"."plainjobs_j_unique__42f6a6_idx"') IS NOT NULL AND to_regclass('"public"."plainjobs_j_concurr_c10926_idx"') IS NULL THEN
        ALTER INDEX "public"."plainjobs_j_unique__42f6a6_idx" RENAME TO "plainjobs_j_concurr_c10926_idx";
    END IF;
    -- plain-jobs 0007's name for the index (the same index once the key column is renamed).
    IF to_regclass('"public"."job_request_class_unique_key"') IS NOT NULL AND to_regclass('"public"."job_request_concurrency_key"') IS NULL THEN
        ALTER INDEX "public"."job_request_class_unique_key" RENAME TO "job_request_concurrency_key";
    END IF;
    -- A rule saved before (an interrupted down rebuilt it) keeps its
    -- original definition; only rules not saved yet are added.
    UPDATE "public"."migrate_unique_version" v SET saved = v.saved || coalesce((
        SELECT jsonb_agg(d.e) FROM jsonb_array_elements(dropped) AS d(e)
        WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v.saved) AS s(e)
                          WHERE s.e->>'table' = d.e->>'table' AND s.e->>'index' = d.e->>'index')), '[]'), updated_at = now()
    WHERE layout = 'two-table:plainjobs_jobrequest,plainjobs_jobprocess,plainjobs_jobresult';
END
$migrate_unique$;
