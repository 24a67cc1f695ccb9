// Package version holds the tool's version, shown by `migrate-unique version`
// and recorded in the migration's version table.
package version

// Version is the release of this tool.
const Version = "0.1.0"
