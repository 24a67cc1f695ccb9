// Package exactuse converts exactjobs.Upload to exact.Task: reported at the
// conversion, never at the package clause.
package exactuse

import (
	"exact"
	"exactjobs"
)

// Tasks lists the tasks.
func Tasks() []exact.Task {
	var keep = exactjobs.Crawl{}
	_ = keep
	return []exact.Task{
		exactjobs.Upload{}, // want `exactjobs.Upload is used as exact.Task, which migrates, but exactjobs.Upload's package does not see that interface`
	}
}
