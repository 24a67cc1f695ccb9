package dependents

// checkConstraintsCheck notes CHECK constraints that read the key column:
// stored parsed, carried.
var checkConstraintsCheck = carriedDeps("check constraint", "check constraints", `
SELECT format('%s on %s.%s', `+quoted("con.conname")+`, `+quoted("n.nspname")+`, `+quoted("c.relname")+`) AS object, '' AS definition
FROM deps JOIN pg_constraint con ON deps.classid = 'pg_constraint'::regclass AND con.oid = deps.objid AND con.contype = 'c'
JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace`, "reads the key column")
