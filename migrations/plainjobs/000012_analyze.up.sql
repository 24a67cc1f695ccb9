ANALYZE "public"."plainjobs_jobrequest", "public"."plainjobs_jobprocess", "public"."plainjobs_jobresult";
