SET LOCAL search_path = pg_catalog, pg_temp;
ANALYZE "public"."plainjobs_jobrequest", "public"."plainjobs_jobprocess", "public"."plainjobs_jobresult";
