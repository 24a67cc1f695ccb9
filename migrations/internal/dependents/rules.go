package dependents

// rulesCheck notes rules (CREATE RULE, not a view's own) that read the key
// column: stored parsed, carried.
var rulesCheck = carriedDeps("rule", "rules", `
SELECT format('rule %s on %s.%s', `+quoted("r.rulename")+`, `+quoted("n.nspname")+`, `+quoted("c.relname")+`) AS object, pg_get_ruledef(r.oid) AS definition
FROM deps JOIN pg_rewrite r ON deps.classid = 'pg_rewrite'::regclass AND r.oid = deps.objid AND r.rulename <> '_RETURN'
JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace`, "reads the key column")
