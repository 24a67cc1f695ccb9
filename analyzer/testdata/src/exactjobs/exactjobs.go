// Package exactjobs does not import exact, so it cannot see the interface
// -interface names: a job-shaped type is a job here, one that only matches
// exact.Task's methods (Start is no run method) is not.
package exactjobs

// Crawl is job-shaped: migrated, as with the default detection.
type Crawl struct{ Site string }

func (c Crawl) UniqueKey() string { return c.Site } // want UniqueKey:"migrates to ConcurrencyKey" `job type Crawl`

func (c Crawl) Run() error { return nil }

// Upload implements exact.Task without importing it and is not job-shaped:
// this package cannot tell it is a job.
type Upload struct{}

func (Upload) UniqueKey() string { return "upload" }

func (Upload) Start() error { return nil }
