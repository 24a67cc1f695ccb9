package compat

import "github.com/migrate-unique/migrate-unique/layout"

// Layout is where a queue keeps its active jobs: the two-table shape
// (RequestsTable, ProcessesTable, optional ResultsTable) or the single-table
// shape (JobsTable, StateColumn, ActiveStates), in Schema, with the job class
// in ClassColumn. Empty names take their defaults. It is the same type the
// migration uses, so one description serves both. See docs/runtime.md.
type Layout = layout.Layout

// PlainJobs returns plain-jobs' own layout: plainjobs_jobrequest,
// plainjobs_jobprocess and plainjobs_jobresult in schema public, class column
// job_class.
func PlainJobs() Layout { return layout.PlainJobs() }

// GroupName is a group's name wherever one is shown or typed (overrides,
// slots, status): the class alone when the key is empty, else class::key.
func GroupName(class, key string) string { return layout.GroupName(class, key) }
