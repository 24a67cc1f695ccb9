-- Read-only: refuse the way back while any group breaks the unique rule that
-- down restores. Nothing is ever deleted to make it fit.
SET LOCAL search_path = pg_catalog, pg_temp;
DO $migrate_unique$
DECLARE
    e pg_catalog.jsonb;
    n bigint;
    groups pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    FOR e IN SELECT jsonb_array_elements(v.saved) FROM "public"."migrate_unique_version" v WHERE v.layout = 'two-table:plainjobs_jobrequest,plainjobs_jobprocess,plainjobs_jobresult' LOOP
        EXECUTE format('SELECT count(*), string_agg(g, E''\n'') FROM (SELECT concat_ws('', '', %s) || '': '' || count(*) AS g FROM %s WHERE %s GROUP BY %s HAVING count(*) > 1) d',
            (SELECT string_agg(c, ', ') FROM jsonb_array_elements_text(e->'columns') AS c),
            e->>'table',
            coalesce('(' || (e->>'predicate') || ') AND ', '') || (SELECT string_agg(c || ' IS NOT NULL', ' AND ') FROM jsonb_array_elements_text(e->'columns') AS c),
            (SELECT string_agg(c, ', ') FROM jsonb_array_elements_text(e->'columns') AS c))
        INTO n, groups;
        IF n > 0 THEN
            RAISE EXCEPTION '% groups in % break the unique rule % (columns, count):%', n, e->>'table', e->>'index', E'\n' || groups;
        END IF;
    END LOOP;
END
$migrate_unique$;
