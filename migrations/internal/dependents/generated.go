package dependents

// generatedColumnsCheck notes generated columns computed from the key
// column: their expression is stored parsed, carried. PostgreSQL 15 and
// later record the dependency from the column's pg_attrdef entry; 13 and 14
// record it from the generated column itself (pg_class, objsubid its
// attnum), which deps does not carry, so that form is read from pg_depend.
var generatedColumnsCheck = carriedDeps("generated column", "generated columns", `
SELECT format('%s.%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`, `+quoted("a.attname")+`) AS object, '' AS definition
FROM deps JOIN pg_attrdef ad ON deps.classid = 'pg_attrdef'::regclass AND ad.oid = deps.objid
JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND a.attgenerated <> ''
JOIN pg_class c ON c.oid = ad.adrelid JOIN pg_namespace n ON n.oid = c.relnamespace
UNION
SELECT format('%s.%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`, `+quoted("a.attname")+`) AS object, '' AS definition
FROM pg_depend d JOIN queue ON d.refclassid = 'pg_class'::regclass AND d.refobjid = queue.rel AND d.refobjsubid = queue.key
JOIN pg_attribute a ON d.classid = 'pg_class'::regclass AND a.attrelid = d.objid AND a.attnum = d.objsubid AND a.attgenerated <> ''
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE d.deptype IN ('n', 'a')`, "is computed from the key column")
