package dependents

// statisticsCheck notes extended statistics (CREATE STATISTICS) on the key
// column or an expression of it: stored by column number or parsed, carried.
var statisticsCheck = carriedDeps("extended statistics", "extended statistics", `
SELECT format('%s.%s', `+quoted("n.nspname")+`, `+quoted("s.stxname")+`) AS object, '' AS definition
FROM deps JOIN pg_statistic_ext s ON deps.classid = 'pg_statistic_ext'::regclass AND s.oid = deps.objid
JOIN pg_namespace n ON n.oid = s.stxnamespace`, "cover the key column")
