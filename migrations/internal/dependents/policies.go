package dependents

// policiesCheck notes row-level security policies whose USING or WITH
// CHECK expression reads the key column: stored parsed, carried.
var policiesCheck = carriedDeps("policy", "row-level security policies", `
SELECT format('%s on %s.%s', `+quoted("p.polname")+`, `+quoted("n.nspname")+`, `+quoted("c.relname")+`) AS object, '' AS definition
FROM deps JOIN pg_policy p ON deps.classid = 'pg_policy'::regclass AND p.oid = deps.objid
JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace`, "(row-level security) reads the key column")
