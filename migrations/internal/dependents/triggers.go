package dependents

// triggersCheck notes triggers whose WHEN condition or UPDATE OF list names
// the key column: stored parsed or by column number, carried. Their
// functions' bodies are another matter (functions.go).
var triggersCheck = carriedDeps("trigger", "trigger conditions", `
SELECT format('%s on %s.%s', `+quoted("tg.tgname")+`, `+quoted("n.nspname")+`, `+quoted("c.relname")+`) AS object, '' AS definition
FROM deps JOIN pg_trigger tg ON deps.classid = 'pg_trigger'::regclass AND tg.oid = deps.objid AND NOT tg.tgisinternal AND tg.tgparentid = 0
JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace`, "has a WHEN condition or an UPDATE OF list on the key column")
