-- plain-jobs' unique rule, rebuilt online before the cutover back attaches it.
CREATE UNIQUE INDEX CONCURRENTLY plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, concurrency_key) WHERE ((retry_attempt OPERATOR(pg_catalog.=) 0) AND ((concurrency_key)::pg_catalog.text OPERATOR(pg_catalog.>) ''::pg_catalog.text));
