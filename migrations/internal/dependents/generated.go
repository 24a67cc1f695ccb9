package dependents

// generatedColumnsCheck notes generated columns computed from the key
// column: their expression is stored parsed, carried.
var generatedColumnsCheck = carriedDeps("generated column", "generated columns", `
SELECT format('%s.%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`, `+quoted("a.attname")+`) AS object, '' AS definition
FROM deps JOIN pg_attrdef ad ON deps.classid = 'pg_attrdef'::regclass AND ad.oid = deps.objid
JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND a.attgenerated <> ''
JOIN pg_class c ON c.oid = ad.adrelid JOIN pg_namespace n ON n.oid = c.relnamespace`, "is computed from the key column")
