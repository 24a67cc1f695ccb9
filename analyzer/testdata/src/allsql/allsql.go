// Package allsql has no legacy job and is analysed with -all-sql: SQL
// naming unique_key is reported whatever its table, as before the scope
// rule; tags, Lua and JSON still are not SQL.
package allsql

const (
	cacheByKey = "DELETE FROM cache_entries WHERE unique_key = $1" // want `string names the unique_key column`
	column     = "unique_key"                                      // want `string names the unique_key column`
	riverSQL   = "UPDATE river_job SET unique_key = NULL"          // want `string names the unique_key column`
	lua        = `return redis.call("HGET", KEYS[1], "unique_key")`
	payload    = `{"unique_key": "user:1"}`
	prose      = "moves a queue from unique_key to concurrency keys"
)

// Row is tagged.
type Row struct {
	Key string `db:"unique_key"`
}

// All lists them.
var All = []string{cacheByKey, column, riverSQL, lua, payload, prose}
